"""A commit git cannot parse (issue 36, item 5): a NUL in its author header made the log parser call
``int('')``, so COLLECT_GIT crashed three times and the project's reports were FAILED for good. Now
it is left out with a warning that names it, listed in ``unreadable`` for the report, and every
strategy of the collector agrees."""

from __future__ import annotations

import logging
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from steps.collect_git import WalkBounds, collect
from tests.fakes.gitrepo import GitRepo, make_repo
from tests.unit.test_collect_git_edges import STRATEGIES

UTC = timezone.utc
START = datetime(2026, 9, 29, tzinfo=UTC)
END = START + timedelta(days=1)


@pytest.fixture(params=sorted(STRATEGIES))
def bounds(request: pytest.FixtureRequest) -> WalkBounds:
    return STRATEGIES[request.param]


def history(repo: GitRepo) -> str:
    repo.commit("the day before", at=START - timedelta(hours=3))
    repo.commit("morning", at=START + timedelta(hours=9))
    corrupt = repo.corrupt_commit("written by a broken tool", at=START + timedelta(hours=10))
    repo.commit("evening", at=START + timedelta(hours=18))
    repo.commit("the day after", at=END + timedelta(hours=2))
    return corrupt


def test_git_itself_calls_the_commit_corrupt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    corrupt = history(repo)
    with pytest.raises(subprocess.CalledProcessError) as failed:
        repo.git("fsck", "--no-dangling")
    assert b"nulInHeader" in failed.value.stderr and corrupt.encode() in failed.value.stderr


def test_a_commit_git_cannot_parse_is_left_out_named_and_never_crashes(
        tmp_path: Path, bounds: WalkBounds, caplog: pytest.LogCaptureFixture) -> None:
    repo = make_repo(tmp_path)
    corrupt = history(repo)
    with caplog.at_level(logging.WARNING, logger="steps.collect_git"):
        out = collect(repo.path, ["main"], START, END, bounds=bounds)
    assert [c.subject for c in out.commits] == ["morning", "evening"]
    assert out.unreadable == [corrupt]
    warnings = [r.getMessage() for r in caplog.records if "commit_unreadable" in r.getMessage()]
    assert len(warnings) == 1 and f"sha={corrupt}" in warnings[0]


def test_an_unreadable_commit_belongs_to_the_window_it_was_committed_in(tmp_path: Path, bounds: WalkBounds) -> None:
    repo = make_repo(tmp_path)
    history(repo)
    before = collect(repo.path, ["main"], START - timedelta(days=1), START, bounds=bounds)
    after = collect(repo.path, ["main"], END, END + timedelta(days=1), bounds=bounds)
    assert before.unreadable == [] and after.unreadable == []
    assert [c.subject for c in before.commits] == ["the day before"]
    assert [c.subject for c in after.commits] == ["the day after"]


# Security round 3, item 4: author dates git prints but no calendar holds. Year 10000 passes ``git fsck``; the
# 20-digit ones are its ``badDateOverflow``. They crashed GENERATE_REPORT (ValueError) and COLLECT_GIT
# (OverflowError) on every retry.
EXTREMES = ["253402300800 +0000", "99999999999999999999 +9999", "18446744073709551615 +0000", "9999999999999 +0000"]


def dated_commit(repo: GitRepo, author_stamp: str, message: str, at: datetime) -> str:
    """A commit whose author line carries ``author_stamp`` as written (hash-object --literally), committed ``at``."""
    committed = f"{int(at.timestamp())} +0000"
    raw = (f"tree {repo.git('write-tree')}\nparent {repo.head()}\nauthor Mallory <m@example.com> {author_stamp}\n"
           f"committer Mallory <m@example.com> {committed}\n\n{message}\n").encode()
    sha = repo.git("hash-object", "-t", "commit", "--literally", "-w", "--stdin", input=raw)
    repo.git("update-ref", "HEAD", sha)
    return sha


@pytest.mark.parametrize("stamp", EXTREMES)
def test_an_author_date_no_calendar_holds_is_left_out_and_named(tmp_path: Path, bounds: WalkBounds,
                                                                 stamp: str) -> None:
    from steps import collect_git

    repo = make_repo(tmp_path)
    base = repo.commit("the day before", at=START - timedelta(hours=3))
    repo.commit("morning", at=START + timedelta(hours=9))
    odd = dated_commit(repo, stamp, "from the far future", START + timedelta(hours=10))
    out = collect(repo.path, ["main"], START, END, bounds=bounds)
    assert [c.subject for c in out.commits] == ["morning"] and out.unreadable == [odd]
    landed = collect_git.collect_between(repo.path, ["main"], {"main": repo.head()}, {"main": base},
                                         attribution="landed", since=START, window_start=START, window_end=END)
    assert [c.subject for c in landed.commits] == ["morning"] and landed.unreadable == [odd]


def test_a_report_of_such_a_window_is_written(tmp_path: Path) -> None:
    from steps import generate_report

    repo = make_repo(tmp_path)
    repo.commit("the day before", at=START - timedelta(hours=3))
    repo.commit("morning", at=START + timedelta(hours=9))
    odd = dated_commit(repo, EXTREMES[0], "from year 10000", START + timedelta(hours=10))
    out = collect(repo.path, ["main"], START, END)
    inp = generate_report.ReportInput(
        workflow="daily_report", project="app", business_key="2026-09-29", window_start=out.window_start,
        window_end=out.window_end, timezone="UTC", commits=out.commits, prompt_version="v4", on_empty="report",
        unreadable=out.unreadable)
    report = generate_report.generate(inp, generate_report.BuiltinWriter(), num_ctx=8192, options={})
    assert "morning" in report.text and odd[:8] in report.text
