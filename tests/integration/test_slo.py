"""Success rate, freshness (SPEC §15.2) and run_late (§15.1) from real rows, SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.models import PeriodKind
from engine.execution import reconciler
from engine.execution.pool import WorkerPool
from engine.read import schedule_queries
from engine.scheduling import definitions, tick
from engine.store import outbox
from tests.flows.testflows import FOUR_STEPS
from tests.support import RuntimeFactory

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


SPEC = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
            misfire="CATCH_UP_ALL", overlap="ALLOW", deadline="30m")


def config(tmp_path: Path) -> dict[str, Any]:
    return {"notify": {"slo_window": "1d"}, "worker": {"max_attempts": 1}, "testflow": {"log": str(tmp_path / "log")}}


def test_success_rate_and_freshness_count_due_periods_and_late_fills(store_url: str, tmp_path: Path,
                                                                     runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows={"four_steps": FOUR_STEPS}, installed=False,
                 config=config(tmp_path), apply=True)
    rt.clock.set(T0 + timedelta(hours=1, minutes=1))
    tick.tick(rt)
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)  # 10:00 SUCCESS, on time
    rt.clock.set(T0 + timedelta(hours=2, minutes=1))
    tick.tick(rt)
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)  # 11:00 SUCCESS, on time
    rt.clock.set(T0 + timedelta(hours=4, minutes=31))  # nobody ticked for 12:00 and 13:00 until now
    reconciler.sweep(rt)  # 12:00 and 13:00 are past their deadline with no row: run_late
    tick.tick(rt)
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)  # 12:00 and 13:00 SUCCESS, late
    got = schedule_queries.schedule_slo(rt, "four")
    assert (got.periods_due, got.succeeded, got.fresh) == (4, 4, 2)  # 14:00 is not due yet (deadline 30m)
    assert got.success_rate == 1.0 and got.freshness == 0.5 and got.window == timedelta(days=1)
    rt.clock.set(T0 + timedelta(hours=6, minutes=30))  # 14:00 and 15:00 due now, with no row: not successful
    got = schedule_queries.schedule_slo(rt, "four")
    assert (got.periods_due, got.succeeded, got.fresh) == (6, 4, 2)
    with rt.store.read() as conn:
        names = sorted(e.event for e in outbox.list_events(conn))
    # 12:00 and 13:00 were late, then succeeded: each raised run_late, then recovered.
    assert names == ["recovered", "recovered", "run_late", "run_late", "silent"]


def test_a_schedule_with_no_period_due_has_no_rate(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows={"four_steps": FOUR_STEPS}, installed=False,
                 config=config(tmp_path), apply=True)
    got = schedule_queries.schedule_slo(rt, "four")
    assert (got.success_rate, got.freshness, got.periods_due) == (None, None, 0)


def test_a_cron_moved_after_todays_run_succeeded_is_neither_late_nor_a_failure(store_url: str, tmp_path: Path,
                                                                               runtime: RuntimeFactory) -> None:
    """The 19:30 run of a daily succeeded; then the cron moved to 20:00. Today is judged by the version in force
    at its slot: its period has its report, so no run_late, and the success rate stays 100%."""
    import dataclasses

    daily = dataclasses.replace(FOUR_STEPS, name="daily_steps", period=PeriodKind.DAY)
    spec = dict(name="daily", workflow="daily_steps", project="p1", cron="30 19 * * *", timezone="UTC",
                report_on="current", deadline="30m")

    settings = {"notify": {"slo_window": "1d"}, "testflow": {"log": str(tmp_path / "log")}}
    rt = runtime(store_url, schedules=[spec], at=datetime(2026, 9, 29, 12, 0, tzinfo=UTC),
                 workflows={"daily_steps": daily}, installed=False, config=settings, apply=True)
    rt.clock.set(datetime(2026, 9, 29, 19, 30, 30, tzinfo=UTC))
    tick.tick(rt)
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    rt = runtime(store_url, schedules=[{**spec, "cron": "0 20 * * *"}], at=datetime(2026, 9, 29, 19, 45, tzinfo=UTC),
                 workflows={"daily_steps": daily}, installed=False, config=settings)
    definitions.apply(rt, confirmed=True)
    rt.clock.set(datetime(2026, 9, 29, 21, 0, tzinfo=UTC))
    tick.tick(rt)
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    reconciler.sweep(rt)
    with rt.store.read() as conn:
        assert [e.event for e in outbox.list_events(conn) if e.event == "run_late"] == []
    got = schedule_queries.schedule_slo(rt, "daily")
    assert (got.periods_due, got.succeeded, got.success_rate) == (1, 1, 1.0)


def test_backfilled_history_counts_for_success_not_freshness(store_url: str, tmp_path: Path,
                                                              runtime: RuntimeFactory) -> None:
    """Periods from before the schedule existed could never be on time: backfilled, they count for the success
    rate, and freshness is not applicable (it said 0%, and raised freshness_low) until a period of its own."""
    import dataclasses
    from datetime import date

    from engine.execution import freshness_alerts
    from engine.operations import actions

    daily = dataclasses.replace(FOUR_STEPS, name="daily_steps", period=PeriodKind.DAY)
    spec = dict(name="daily", workflow="daily_steps", project="p1", cron="30 19 * * *", timezone="UTC",
                report_on="current", deadline="30m", freshness_target="95%")
    rt = runtime(store_url, schedules=[spec], at=datetime(2026, 9, 29, 12, 0, tzinfo=UTC),
                 workflows={"daily_steps": daily}, installed=False,
                 config={**config(tmp_path), "notify": {"slo_window": "30d"}}, apply=True)
    assert len(actions.backfill(rt, "daily", first=date(2026, 9, 20), last=date(2026, 9, 28)).created) == 9
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    got = schedule_queries.schedule_slo(rt, "daily")
    assert (got.periods_due, got.succeeded, got.success_rate) == (9, 9, 1.0)
    assert (got.freshness, got.fresh_due) == (None, 0)
    assert freshness_alerts.mark_low(rt, rt.clock.now()) == 0
    rt.clock.set(datetime(2026, 9, 29, 19, 30, 30, tzinfo=UTC))
    tick.tick(rt)
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    rt.clock.set(datetime(2026, 9, 29, 20, 30, tzinfo=UTC))
    got = schedule_queries.schedule_slo(rt, "daily")
    assert (got.periods_due, got.succeeded, got.fresh, got.fresh_due, got.freshness) == (10, 10, 1, 1, 1.0)
    assert freshness_alerts.mark_low(rt, rt.clock.now()) == 0
