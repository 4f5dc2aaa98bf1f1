"""A commit git cannot parse (issue 36, item 5): a NUL in its author header made the log parser call
``int('')``, so COLLECT_GIT crashed three times and the project's reports were FAILED for good. Now
it is left out with a warning that names it, listed in ``unreadable`` for the report, and every
strategy of the collector agrees."""

from __future__ import annotations

import logging
import subprocess
from datetime import datetime, timedelta, timezone

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


def test_git_itself_calls_the_commit_corrupt(tmp_path: object) -> None:
    repo = make_repo(tmp_path)  # type: ignore[arg-type]
    corrupt = history(repo)
    with pytest.raises(subprocess.CalledProcessError) as failed:
        repo.git("fsck", "--no-dangling")
    assert b"nulInHeader" in failed.value.stderr and corrupt.encode() in failed.value.stderr


def test_a_commit_git_cannot_parse_is_left_out_named_and_never_crashes(
        tmp_path: object, bounds: WalkBounds, caplog: pytest.LogCaptureFixture) -> None:
    repo = make_repo(tmp_path)  # type: ignore[arg-type]
    corrupt = history(repo)
    with caplog.at_level(logging.WARNING, logger="steps.collect_git"):
        out = collect(repo.path, ["main"], START, END, bounds=bounds)
    assert [c.subject for c in out.commits] == ["morning", "evening"]
    assert out.unreadable == [corrupt]
    warnings = [r.getMessage() for r in caplog.records if "commit_unreadable" in r.getMessage()]
    assert len(warnings) == 1 and f"sha={corrupt}" in warnings[0]


def test_an_unreadable_commit_belongs_to_the_window_it_was_committed_in(tmp_path: object, bounds: WalkBounds) -> None:
    repo = make_repo(tmp_path)  # type: ignore[arg-type]
    history(repo)
    before = collect(repo.path, ["main"], START - timedelta(days=1), START, bounds=bounds)
    after = collect(repo.path, ["main"], END, END + timedelta(days=1), bounds=bounds)
    assert before.unreadable == [] and after.unreadable == []
    assert [c.subject for c in before.commits] == ["the day before"]
    assert [c.subject for c in after.commits] == ["the day after"]
