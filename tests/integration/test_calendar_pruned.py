"""The calendar reads the pruned ranges a prune recorded: those periods are PRUNED, not gaps to backfill."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from engine.core.clock import ManualClock
from engine.execution.pool import WorkerPool
from engine.operations import prune
from engine.read import calendar_view
from engine.scheduling import definitions, tick
from tests.support import make_runtime

T0 = datetime(2026, 9, 1, 0, 0, tzinfo=UTC)


def test_pruned_periods_show_pruned_and_are_not_offered_to_backfill(store_url: str) -> None:
    spec = dict(name="daily", workflow="echo", project="p1", cron="0 9 * * *", timezone="UTC",
                misfire="CATCH_UP_ALL", overlap="ALLOW", catchup_window="30d")
    rt = make_runtime(store_url, schedules=[spec], clock=ManualClock(T0))
    definitions.apply(rt)
    rt.clock.set(T0 + timedelta(days=10))  # ten daily slots, 09-01 .. 09-10
    tick.tick(rt)
    assert len(WorkerPool(rt, "w", concurrency=1).work(until_idle=True)) == 10
    report = prune.prune(rt, date(2026, 9, 6))  # the periods 09-01 .. 09-05
    assert report.removed == 5

    row = calendar_view.calendar(rt, "daily", weeks=2)
    states = {cell.day: cell.state for cell in row.cells}
    assert [states[date(2026, 9, d)] for d in range(1, 11)] == ["PRUNED"] * 5 + ["SUCCESS"] * 5
    # Settled history: no pruned day is offered to a backfill (the days before the schedule still are).
    offered = row.backfill_ranges()
    assert offered and not any(first <= date(2026, 9, 5) and last >= date(2026, 9, 1) for first, last, _ in offered)
