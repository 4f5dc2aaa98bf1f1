"""A daily names the merges its commits came by (layout 5), as a weekly does: the pull request in the merge's
subject and the commits it brought; a day without a merge has no such section, and a daily pinned before keeps
its layout."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.scheduling import definitions
from engine.store import run_rows
from tests.fakes.gitrepo import GitRepo
from tests.integration.test_weekly_week import build
from tests.support import make_runtime, output_of


def daily(url: str, tmp_path: Path, repo: GitRepo, day: date, *, attribution: str,
          language: str = "en") -> tuple[str, dict[str, Any]]:
    extra: dict[str, Any] = {
        "projects": [{"key": "shop", "repo": str(repo.path), "branches": ["main"], "on_empty": "report"}],
        "reports": {"dir": str(tmp_path / "reports"), "language": language},
        "llm": {"provider": "builtin"},
    }
    spec = dict(name="shop-daily", workflow="daily_report", project="shop", cron="0 19 * * *",
                timezone="Asia/Seoul", attribution=attribution)
    rt = make_runtime(url, schedules=[spec], clock=ManualClock(datetime(2026, 10, 5, tzinfo=UTC)), extra=extra)
    definitions.apply(rt)
    result = actions.trigger(rt, "shop-daily", day=day)
    outcome = Worker(rt, "w").run_one()
    assert outcome is not None and outcome.status is RunStatus.SUCCESS
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, result.run_id)
    return str(output_of(run, 1)["text"]), dict(run.pinned)


@pytest.mark.parametrize("attribution", ["landed", "authored"])
def test_the_day_of_the_merge_names_its_pull_request_and_what_it_brought(sqlite_url: str, tmp_path: Path,
                                                                          attribution: str) -> None:
    repo = build(tmp_path)
    merge = repo.head("main~1")
    feature = [repo.head("feature~1"), repo.head("feature")]
    text, pinned = daily(sqlite_url, tmp_path, repo, date(2026, 9, 30), attribution=attribution)
    assert pinned["layout"] >= 5
    section = text.split("## Merged\n", 1)[1].split("\n## ", 1)[0]
    assert f"`{merge[:8]}` Merge pull request #14 from bob/feature (Alice Kim): brought 2 commits" in section
    assert all(sha[:8] in section for sha in feature)


def test_a_day_without_a_merge_has_no_merged_section(sqlite_url: str, tmp_path: Path) -> None:
    repo = build(tmp_path)
    text, _ = daily(sqlite_url, tmp_path, repo, date(2026, 10, 2), attribution="landed")
    assert "Cart discounts" in text and "## Merged" not in text


def test_the_korean_daily_names_it_too(sqlite_url: str, tmp_path: Path) -> None:
    repo = build(tmp_path)
    text, _ = daily(sqlite_url, tmp_path, repo, date(2026, 9, 30), attribution="landed", language="ko")
    assert "## 병합\n" in text and "Merge pull request #14" in text and "커밋 2개 병합" in text
