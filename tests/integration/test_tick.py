"""The tick against real databases (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import func, select

from engine.core.clock import ManualClock
from engine.core.models import Run
from engine.operations import actions
from engine.runtime import Runtime
from engine.scheduling import definitions, tick
from engine.store import audit_rows, run_rows, schedule_rows
from engine.store.tables import audit_events, runs
from tests.support import ManualRuntime, make_runtime


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 9, day, hour, minute, tzinfo=UTC)


def hourly(misfire: str, overlap: str = "ALLOW", **extra: object) -> dict[str, object]:
    return dict(name="hourly", workflow="echo", project="p1", cron="0 * * * *", timezone="UTC",
                misfire=misfire, overlap=overlap, grace="10m", **extra)


def all_runs(rt: Runtime) -> list[Run]:
    with rt.store.read() as conn:
        return sorted(run_rows.list_runs(conn, limit=None), key=lambda r: r.scheduled_for)


def apply_at(rt: ManualRuntime, instant: datetime) -> None:
    rt.clock.set(instant)
    definitions.apply(rt)


@pytest.mark.parametrize(("misfire", "tick_at", "expected"), [
    ("SKIP", at(29, 14, 5), ["MISSED"] * 4 + ["QUEUED"]),
    ("RUN_ONCE", at(29, 14, 5), ["MISSED"] * 4 + ["QUEUED"]),
    ("CATCH_UP_ALL", at(29, 14, 5), ["QUEUED"] * 5),
    ("MANUAL", at(29, 14, 5), ["MANUAL_REQUIRED"] * 4 + ["QUEUED"]),
    ("RUN_ONCE", at(29, 14, 15), ["MISSED"] * 4 + ["QUEUED"]),
    ("MANUAL", at(29, 14, 15), ["MANUAL_REQUIRED"] * 5),
])
def test_worked_cases_through_the_database(store_url: str, misfire: str, tick_at: datetime,
                                           expected: list[str]) -> None:
    rt = make_runtime(store_url, schedules=[hourly(misfire)], clock=ManualClock(at(29, 9, 30)))
    apply_at(rt, at(29, 9, 30))  # next_run_at = 10:00
    rt.clock.set(tick_at)
    report = tick.tick(rt)
    found = all_runs(rt)
    assert [r.scheduled_for for r in found] == [at(29, h) for h in (10, 11, 12, 13, 14)]
    assert [r.status.value for r in found] == expected
    assert all(r.trigger.value == "SCHEDULED" for r in found)
    assert report.runs_created == 5
    with rt.store.read() as conn:
        assert schedule_rows.get_schedule(conn, "hourly").next_run_at == at(29, 15)
    # A second tick at the same instant changes nothing.
    again = tick.tick(rt)
    assert again.runs_created == 0 and len(all_runs(rt)) == 5


def test_catch_up_with_queue_new_queues_one_and_holds_the_rest(store_url: str) -> None:
    rt = make_runtime(store_url, schedules=[hourly("CATCH_UP_ALL", "QUEUE_NEW")], clock=ManualClock(at(29, 9, 30)))
    apply_at(rt, at(29, 9, 30))
    rt.clock.set(at(29, 14, 5))
    tick.tick(rt)
    assert [r.status.value for r in all_runs(rt)] == ["QUEUED"] + ["PENDING"] * 4


def test_pinned_inputs_are_recorded_at_creation(store_url: str) -> None:
    spec = dict(name="daily", workflow="echo", project="p1", cron="30 19 * * *", timezone="Asia/Seoul")
    rt = make_runtime(store_url, schedules=[spec], clock=ManualClock(at(29, 0)))
    apply_at(rt, at(29, 0))
    rt.clock.set(at(29, 10, 31))
    tick.tick(rt)
    (run,) = all_runs(rt)
    assert run.idempotency_key == "echo:p1:2026-09-29T10:30Z"
    for key in ("business_key", "window_start", "window_end", "window_start_local", "timezone",
                "schedule_version", "cron", "payload_version"):
        assert key in run.pinned
    assert run.pinned["cron"] == "30 19 * * *" and run.pinned["timezone"] == "Asia/Seoul"


def test_a_workflow_pin_cannot_replace_the_engines(store_url: str) -> None:
    from dataclasses import replace

    from engine.plugins.workflow_registry import load_registry

    installed = load_registry()
    echo = replace(installed["echo"], pin=lambda settings, project: {"payload_version": 99, "window_start": "x",
                                                                     "colour": "blue"})
    spec = dict(name="daily", workflow="echo", project="p1", cron="30 19 * * *", timezone="UTC")
    rt = make_runtime(store_url, schedules=[spec], clock=ManualClock(at(29, 0)), registry={**installed, "echo": echo})
    apply_at(rt, at(29, 0))
    rt.clock.set(at(29, 19, 31))
    tick.tick(rt)
    (run,) = all_runs(rt)
    assert run.pinned["payload_version"] == echo.payload_version
    assert run.pinned["window_start"] == "2026-09-29T19:30:00Z" and run.pinned["colour"] == "blue"


@pytest.mark.slow  # a year of hourly slots ticked: in the full suite, not in --fast
def test_year_of_downtime_creates_only_the_window(store_url: str) -> None:
    spec = dict(name="minutely", workflow="echo", project="p1", cron="* * * * *", timezone="UTC",
                allow_frequent=True, misfire="SKIP", overlap="SKIP_NEW")
    rt = make_runtime(store_url, schedules=[spec], clock=ManualClock(at(1, 0) - timedelta(days=365)))
    apply_at(rt, at(1, 0) - timedelta(days=365))
    rt.clock.set(at(1, 0))
    report = tick.tick(rt)
    window_slots = 7 * 24 * 60
    assert report.runs_created == window_slots + 1  # every minute of [now - 7d, now], both ends included
    assert report.too_old_slots == pytest.approx(358 * 24 * 60, rel=0.01)
    with rt.store.read() as conn:
        audit = conn.execute(select(audit_events.c.after).where(audit_events.c.action == "slots_too_old")).scalars()
        (too_old,) = list(audit)
    assert too_old["estimated_slots"] == report.too_old_slots


def test_eight_ticks_race_in_process_threads_create_each_run_once(store_url: str) -> None:
    import threading

    specs = [dict(name=f"s{i}", workflow="echo", project=f"p{i}", cron="*/10 * * * *", timezone="UTC",
                  allow_frequent=False, misfire="CATCH_UP_ALL", overlap="ALLOW") for i in range(20)]
    rt = make_runtime(store_url, schedules=specs, clock=ManualClock(at(29, 0)))
    apply_at(rt, at(29, 0))
    rt.clock.set(at(29, 5))
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def go() -> None:
        try:
            barrier.wait()
            tick.tick(rt)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    found = all_runs(rt)
    assert len(found) == 20 * 30  # 10-minute slots over 5 hours, per schedule
    assert len({(r.schedule_id, r.scheduled_for) for r in found}) == len(found)


def test_backfill_twice_creates_nothing_the_second_time(store_url: str) -> None:
    spec = dict(name="daily", workflow="daily_report", project="p1", cron="0 3 * * *", timezone="Asia/Seoul")
    extra = {"projects": [{"key": "p1", "repo": "."}]}
    rt = make_runtime(store_url, schedules=[spec], clock=ManualClock(at(29, 0)), extra=extra)
    apply_at(rt, at(29, 0))
    first = actions.backfill(rt, "daily", first=date(2026, 8, 28), last=date(2026, 9, 29))
    # Slots are at 03:00 Seoul the next day: 09-29's report fires 09-30 03:00, still in the future.
    assert len(first.created) == 32 and first.future == ["2026-09-29"]
    second = actions.backfill(rt, "daily", first=date(2026, 8, 28), last=date(2026, 9, 29))
    assert second.created == [] and len(second.present) == 32
    runs_now = all_runs(rt)
    assert len(runs_now) == 32
    assert {r.trigger.value for r in runs_now} == {"BACKFILL"}
    assert {r.priority for r in runs_now} == {10}


def test_backfill_requeues_missed_and_lists_failed(store_url: str) -> None:
    rt = make_runtime(store_url, schedules=[hourly("SKIP")], clock=ManualClock(at(29, 9, 30)))
    apply_at(rt, at(29, 9, 30))
    rt.clock.set(at(29, 14, 5))
    tick.tick(rt)
    report = actions.backfill(rt, "hourly", first=date(2026, 9, 29), last=date(2026, 9, 29))
    # 00:00-09:00 had no row: created; 10:00-13:00 were MISSED: re-queued; 14:00 is queued already;
    # 15:00-23:00 are still in the future.
    assert len(report.created) == 10 and len(report.requeued) == 4 and len(report.present) == 1
    assert len(report.future) == 9
    statuses = Counter((r.trigger.value, r.status.value) for r in all_runs(rt))
    assert statuses == {("BACKFILL", "QUEUED"): 10, ("SCHEDULED", "QUEUED"): 5}
    with rt.store.read() as conn:
        total = conn.execute(select(func.count()).select_from(runs)).scalar_one()
    assert total == 15


def test_trigger_follows_the_period_table(store_url: str) -> None:
    rt = make_runtime(store_url, schedules=[hourly("MANUAL")], clock=ManualClock(at(29, 9, 30)))
    apply_at(rt, at(29, 9, 30))
    rt.clock.set(at(29, 14, 15))
    tick.tick(rt)  # five MANUAL_REQUIRED
    result = actions.trigger(rt, "hourly")  # latest slot 14:00: approves it
    assert result.action == "approved"
    again = actions.trigger(rt, "hourly")
    assert again.action == "unchanged"
    forced = actions.trigger(rt, "hourly", force_new=True)
    assert forced.action == "revision"
    with rt.store.read() as conn:
        revision = run_rows.get_run(conn, forced.run_id)
    assert revision.revision == 2 and revision.idempotency_key.endswith("#2")
    with pytest.raises(Exception) as info:
        actions.trigger(rt, "hourly", day=date(2026, 10, 5))
    assert getattr(info.value, "exit_code", None) == 2


def test_disabled_schedule_is_not_ticked_and_restarts_from_now(store_url: str) -> None:
    rt = make_runtime(store_url, schedules=[hourly("CATCH_UP_ALL")], clock=ManualClock(at(29, 9, 30)))
    apply_at(rt, at(29, 9, 30))
    definitions.set_enabled(rt, "hourly", enabled=False, reason="maintenance")
    rt.clock.set(at(29, 14, 5))
    assert tick.tick(rt).runs_created == 0
    definitions.apply(rt)  # the config says enabled, but the CLI disabled it: stays disabled
    with rt.store.read() as conn:
        assert not schedule_rows.get_schedule(conn, "hourly").enabled
    definitions.set_enabled(rt, "hourly", enabled=True, reason="back")
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, "hourly")
        actions = [e.action for e in audit_rows.list_audit(conn, schedule_id=schedule.id)]
    assert schedule.next_run_at == at(29, 15)
    assert actions == ["create", "disable", "slots_disabled", "enable"]


def test_the_due_query_uses_its_partial_index(sqlite_url: str) -> None:
    """A tick with nothing due must cost one indexed lookup, not a scan of every schedule."""
    from sqlalchemy.dialects import sqlite

    rt = make_runtime(sqlite_url, schedules=[hourly("SKIP")], clock=ManualClock(at(29, 9, 30)))
    apply_at(rt, at(29, 9, 30))
    query = schedule_rows.due_query(at(29, 10))
    compiled = str(query.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    with rt.store.read() as conn:
        plan = " ".join(str(row[-1]) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + compiled))
    assert "ix_schedules_due" in plan, plan
