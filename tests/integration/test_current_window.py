"""A ``report_on = "current"`` run's window ends at its slot, not when it runs (SPEC §2, issue 21 item 6)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import sqlalchemy as sa

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.runtime import Runtime
from engine.scheduling import definitions
from engine.store import run_rows
from engine.store.tables import runs
from tests.fakes.gitrepo import make_repo
from tests.support import ManualRuntime, make_runtime, output_of, run_next

SEOUL = ZoneInfo("Asia/Seoul")
DAY = date(2026, 9, 29)
SLOT = datetime(2026, 9, 29, 19, 30, tzinfo=SEOUL)


def _site(url: str, tmp_path: Path) -> tuple[ManualRuntime, dict[str, str]]:
    repo = make_repo(tmp_path)
    shas = {
        "morning": repo.commit("morning work", at=datetime(2026, 9, 29, 10, 0, tzinfo=SEOUL)),
        "evening": repo.commit("after the 19:30 slot", at=datetime(2026, 9, 29, 21, 0, tzinfo=SEOUL)),
    }
    extra: dict[str, Any] = {
        "projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"]}],
        "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"},
    }
    spec = dict(name="today", workflow="daily_report", project="platform", cron="30 19 * * *",
                timezone="Asia/Seoul", report_on="current")
    # The run is made the next morning (a catch-up): the evening commit already exists.
    rt = make_runtime(url, schedules=[spec], clock=ManualClock(SLOT.astimezone(UTC) + timedelta(hours=14)),
                      extra=extra)
    definitions.apply(rt)
    return rt, shas


def _collected(rt: Runtime, run_id: int) -> list[str]:
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, run_id)
    return [c["sha"] for c in output_of(run, 0)["commits"]]


def test_a_late_current_run_and_its_retry_a_day_later_collect_up_to_the_slot(store_url: str, tmp_path: Path) -> None:
    rt, shas = _site(store_url, tmp_path)
    made = actions.trigger(rt, "today", day=DAY)
    with rt.store.read() as conn:
        pinned = run_rows.get_run(conn, made.run_id, detail=False).pinned
    assert (pinned["window_end"], pinned["window_rule"]) == ("2026-09-29T10:30:00Z", "until_slot")
    assert pinned["window_end_local"] == "2026-09-29T19:30:00+09:00"
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert _collected(rt, made.run_id) == [shas["morning"]]
    rt.clock.advance(timedelta(days=1))
    actions.retry(rt, made.run_id, from_step="COLLECT_GIT")
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert _collected(rt, made.run_id) == [shas["morning"]]


def test_a_run_pinned_before_the_window_rule_keeps_its_whole_day(store_url: str, tmp_path: Path) -> None:
    rt, shas = _site(store_url, tmp_path)
    made = actions.trigger(rt, "today", day=DAY)
    with rt.store.write() as conn:
        pinned = dict(run_rows.get_run(conn, made.run_id, detail=False).pinned)
        pinned.pop("window_rule", None)  # as a run created before this change was pinned
        pinned.update(window_end="2026-09-29T15:00:00Z", window_end_local="2026-09-30T00:00:00+09:00")
        conn.execute(sa.update(runs).where(runs.c.id == made.run_id).values(pinned=pinned))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert sorted(_collected(rt, made.run_id)) == sorted(shas.values())
