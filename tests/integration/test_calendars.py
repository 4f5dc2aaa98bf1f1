"""Holidays and maintenance windows (SPEC §18), on SQLite and PostgreSQL: slots recorded with their reason,
no alert for them, the next report covers a holiday's commits, and no late, silent or stuck alert inside a
window."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core import errors
from engine.core.models import RunStatus
from engine.execution import reconciler
from engine.execution.pool import WorkerPool
from engine.execution.worker import Worker
from engine.read import schedule_queries
from engine.scheduling import definitions, tick
from engine.store import audit_rows, metric_facts, outbox, run_rows, schedule_rows
from tests.fakes.gitrepo import make_repo
from tests.flows.testflows import FOUR_STEPS
from tests.integration import test_coverage_git as coverage_git
from tests.support import RuntimeFactory

# Friday 2026-10-09 is Hangul Day in Korea; Thursday 2026-10-08 one of the office's own days off.
SEOUL_DAILY = dict(name="kr", workflow="four_steps", project="p1", cron="0 9 * * *", timezone="Asia/Seoul",
                   misfire="CATCH_UP_ALL", calendar="KR", holidays=["2026-10-08"], deadline="1h")
HOURLY = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
              misfire="CATCH_UP_ALL", overlap="ALLOW", deadline="30m")
T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


def config(tmp_path: Path, **sections: Any) -> dict[str, Any]:
    return {"notify": {"stuck_after": "30m"}, "worker": {"max_attempts": 1},
            "testflow": {"log": str(tmp_path / "log")}, **sections}


def events(rt: Any) -> list[str]:
    with rt.store.read() as conn:
        return sorted(e.event for e in outbox.list_events(conn))


def slots(rt: Any) -> dict[str, tuple[RunStatus, str | None]]:
    with rt.store.read() as conn:
        return {r.scheduled_for.isoformat(): (r.status, r.reason) for r in run_rows.list_runs(conn)}


def test_holiday_slots_are_recorded_holiday_and_raise_no_alert(store_url: str, tmp_path: Path,
                                                               runtime: RuntimeFactory) -> None:
    start = datetime(2026, 10, 6, 0, 30, tzinfo=UTC)  # Tuesday, 09:30 in Seoul
    rt = runtime(store_url, schedules=[SEOUL_DAILY], at=start, workflows={"four_steps": FOUR_STEPS},
                 installed=False, config=config(tmp_path), apply=True)
    for day in range(7, 12):  # Wednesday to Sunday, each just after 09:00 in Seoul
        rt.clock.set(datetime(2026, 10, day, 0, 1, tzinfo=UTC))
        tick.tick(rt)
        WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
        rt.clock.advance(timedelta(hours=2))
        reconciler.sweep(rt)
    got = slots(rt)
    assert got["2026-10-07T00:00:00+00:00"] == (RunStatus.SUCCESS, None)
    assert got["2026-10-08T00:00:00+00:00"] == (RunStatus.SKIPPED, "holiday")  # the office's own day
    assert got["2026-10-09T00:00:00+00:00"] == (RunStatus.SKIPPED, "holiday")  # Hangul Day, from the package
    assert got["2026-10-10T00:00:00+00:00"] == (RunStatus.SUCCESS, None)
    assert events(rt) == []  # neither late nor missed
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, "kr")
        counted = audit_rows.list_audit(conn, schedule_id=schedule.id, action="slots_holiday")
        assert sum(e.after["count"] for e in counted) == 2  # type: ignore[index]
        assert audit_rows.list_audit(conn, schedule_id=schedule.id, action="slots_overlap_skipped") == []
        metrics = metric_facts.read_snapshot(conn, rt.clock.now())
    assert metrics.slots_not_run[("kr", "holiday")] == 2 and metrics.missed_slots["kr"] == 0


def test_a_holiday_does_not_lower_freshness(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    """Every working day on time against a target of 100%: the two days off are not stale periods."""
    daily = dict(SEOUL_DAILY, freshness_target="100% within 1h")
    rt = runtime(store_url, schedules=[daily], at=datetime(2026, 10, 6, 0, 30, tzinfo=UTC),
                 workflows={"four_steps": FOUR_STEPS}, installed=False,
                 config=config(tmp_path, notify={"stuck_after": "30m", "slo_window": "7d"}), apply=True)
    lows = 0
    for day in range(7, 13):
        rt.clock.set(datetime(2026, 10, day, 0, 1, tzinfo=UTC))
        tick.tick(rt)
        WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
        rt.clock.advance(timedelta(hours=2))
        lows += reconciler.sweep(rt).freshness_low
    assert lows == 0 and events(rt) == []
    assert schedule_queries.schedule_slo(rt, "kr").freshness == 1.0


def test_a_commit_on_a_holiday_is_in_the_next_working_days_report_once(store_url: str, tmp_path: Path,
                                                                       runtime: RuntimeFactory) -> None:
    repo = make_repo(tmp_path)
    repo.commit("base", at=coverage_git.at(-7, 9))
    rt = coverage_git.app_daily_runtime(runtime, store_url, tmp_path, repo, calendar="KR", holidays=["2026-11-04"])
    coverage_git.cycle(rt, coverage_git.at(0, 19, 30))
    tuesday = repo.commit("tuesday", at=coverage_git.at(1, 12))
    coverage_git.cycle(rt, coverage_git.at(1, 19, 30))
    after_tuesday = repo.commit("after tuesday's report", at=coverage_git.at(1, 21))
    holiday = repo.commit("on the holiday", at=coverage_git.at(2, 12))
    coverage_git.cycle(rt, coverage_git.at(2, 19, 30))  # Wednesday: a holiday, no report
    thursday = repo.commit("thursday", at=coverage_git.at(3, 12))
    coverage_git.cycle(rt, coverage_git.at(3, 19, 30))
    coverage_git.cycle(rt, coverage_git.at(4, 19, 30))

    held = {key: [c["sha"] for c in out["commits"]] for key, out in coverage_git.reports(rt).items()}
    assert "2026-11-04" not in held
    assert held["2026-11-03"] == [tuesday]
    assert set(held["2026-11-05"]) == {after_tuesday, holiday, thursday}
    everyone = [sha for shas in held.values() for sha in shas]
    assert sorted(everyone) == sorted({tuesday, after_tuesday, holiday, thursday})  # each exactly once
    assert slots(rt)["2026-11-04T19:30:00+00:00"] == (RunStatus.SKIPPED, "holiday")


def test_slots_inside_a_maintenance_window_are_recorded_and_nothing_alerts_inside(
        store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    window = {"start": "2026-09-29T11:30:00Z", "end": "2026-09-29T14:30:00+00:00", "reason": "database upgrade"}
    rt = runtime(store_url, schedules=[HOURLY], at=T0, workflows={"four_steps": FOUR_STEPS}, installed=False,
                 config=config(tmp_path, maintenance=[window]), apply=True)
    rt.clock.set(T0 + timedelta(hours=2, minutes=1))  # 11:01: 10:00 and 11:00 queued, nobody works them
    tick.tick(rt)
    for minutes in (150, 210, 269):  # 11:30 to 14:30: the queue does not move, no scheduler ticks for a while
        rt.clock.set(T0 + timedelta(minutes=minutes))
        report = reconciler.sweep(rt)
        assert report.stuck == [] and report.silent == []
    tick.tick(rt)  # 13:29: 12:00 and 13:00 are inside the window
    assert events(rt) == []  # no run_late, no run_stuck, no silent inside the window
    rt.clock.set(T0 + timedelta(hours=5, minutes=45))  # 14:45: the window is over
    tick.tick(rt)
    reconciler.sweep(rt)
    got = slots(rt)
    assert [got[f"2026-09-29T{h}:00:00+00:00"] for h in (12, 13, 14)] == [(RunStatus.SKIPPED, "maintenance")] * 3
    assert got["2026-09-29T10:00:00+00:00"][0] is RunStatus.QUEUED
    # After the window the queue that did not move is an alert again; 11:00's deadline fell inside it.
    late = [e for e in events(rt) if e == "run_late"]
    assert late == ["run_late"]  # 10:00 only (its deadline, 10:30, was before the window)
    assert "run_stuck" in events(rt)


def test_pause_records_maintenance_until_it_ends_and_resume_ends_it_early(store_url: str, tmp_path: Path,
                                                                         runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[HOURLY], at=T0, workflows={"four_steps": FOUR_STEPS}, installed=False,
                 config=config(tmp_path), apply=True)
    rt.clock.set(T0 + timedelta(minutes=30))
    paused = definitions.pause(rt, "four", until=T0 + timedelta(hours=5), reason="repo migration")
    assert paused.paused_until == T0 + timedelta(hours=5) and paused.pause_reason == "repo migration"
    rt.clock.set(T0 + timedelta(hours=2, minutes=1))
    tick.tick(rt)
    rt.clock.set(T0 + timedelta(hours=2, minutes=10))
    _, changed = definitions.resume(rt, "four", reason="done early")
    assert changed
    rt.clock.set(T0 + timedelta(hours=3, minutes=1))
    tick.tick(rt)
    got = slots(rt)
    assert [got[f"2026-09-29T{h}:00:00+00:00"] for h in (10, 11)] == [(RunStatus.SKIPPED, "maintenance")] * 2
    assert got["2026-09-29T12:00:00+00:00"] == (RunStatus.QUEUED, None)
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, "four")
        actions = [(e.action, e.actor, e.reason) for e in audit_rows.list_audit(conn, schedule_id=schedule.id)
                   if e.action in ("pause", "resume")]
    assert actions == [("pause", "tester", "repo migration"), ("resume", "tester", "done early")]


def test_a_running_run_finishes_inside_a_pause(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[HOURLY], at=T0, workflows={"four_steps": FOUR_STEPS}, installed=False,
                 config=config(tmp_path), apply=True)
    rt.clock.set(T0 + timedelta(hours=1, minutes=1))
    tick.tick(rt)
    worker = Worker(rt, "w")
    claim = worker.claim()
    assert claim is not None
    definitions.pause(rt, "four", until=T0 + timedelta(hours=3), reason="upgrade")
    assert worker.execute(claim).status is RunStatus.SUCCESS


def test_pause_until_the_past_is_refused_and_writes_nothing(store_url: str, tmp_path: Path,
                                                            runtime: RuntimeFactory) -> None:
    from tests.dbstate import fingerprint

    rt = runtime(store_url, schedules=[HOURLY], at=T0, workflows={"four_steps": FOUR_STEPS}, installed=False,
                 config=config(tmp_path), apply=True)
    before = fingerprint(store_url)
    with pytest.raises(errors.InvalidInput, match="not in the future"):
        definitions.pause(rt, "four", until=T0 - timedelta(minutes=1), reason="late")
    assert fingerprint(store_url) == before


def test_the_schedule_page_shows_holidays_and_the_pause(sqlite_url: str, tmp_path: Path,
                                                        runtime: RuntimeFactory) -> None:
    from tests.integration.test_web_pages import client

    start = datetime(2026, 10, 6, 0, 30, tzinfo=UTC)
    rt = runtime(sqlite_url, schedules=[SEOUL_DAILY], at=start, workflows={"four_steps": FOUR_STEPS},
                 installed=False, config=config(tmp_path), apply=True)
    rt.clock.set(datetime(2026, 10, 9, 0, 1, tzinfo=UTC))
    tick.tick(rt)
    definitions.pause(rt, "kr", until=datetime(2026, 10, 12, tzinfo=UTC), reason="office move")
    page = client(rt).get("/schedules/kr")
    assert page.status_code == 200
    assert "2026-10-08T00:00Z — SKIPPED (holiday)" in page.text and "2026-10-09T00:00Z — SKIPPED (holiday)" in page.text
    assert "2026-10-10T00:00Z — NOT_YET_DUE (maintenance)" in page.text  # paused: it will not run
    gaps = re.findall(r'href="/schedules/kr/backfill\?from=([0-9-]+)&amp;to=([0-9-]+)"', page.text)
    assert gaps == [("2026-09-28", "2026-10-06")]  # before the schedule existed; a holiday is no gap to fill
    assert 'id="maintenance"' in page.text and "office move" in page.text
    assert "KR and 2026-10-08" in page.text
