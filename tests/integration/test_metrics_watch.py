"""The metrics of SPEC §15.8 (seed 003's list) per schedule, on SQLite and PostgreSQL: runs created, slots not run
with MANUAL_REQUIRED counted, how long the oldest waits, runs in progress in the histograms and gauges, stuck,
late and held runs, undelivered alerts, the scheduler's beat, and freshness against ``freshness_target``
with its ``freshness_low`` alert."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from engine.core import errors
from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution import reconciler
from engine.execution.pool import WorkerPool
from engine.operations import actions, bulk_actions, prune
from engine.read import metrics
from engine.scheduling import definitions, tick
from engine.store import claims, instances, outbox
from tests.integration.test_metrics import samples, value
from tests.support import make_runtime

T0 = datetime(2026, 9, 29, 10, 0, tzinfo=UTC)
DAILY = dict(workflow="echo", cron="0 9 * * *", timezone="UTC")


def test_manual_required_slots_are_missed_and_waiting(store_url: str) -> None:
    """Four days down under misfire = "MANUAL": missed was 0 and the oldest pending age 0; no longer."""
    rt = make_runtime(store_url, clock=ManualClock(T0), schedules=[dict(name="m", project="p", misfire="MANUAL",
                                                                         **DAILY)])
    definitions.apply(rt)  # next slot 2026-09-30 09:00
    rt.clock.set(T0 + timedelta(days=4, hours=2))  # 10-03 12:00: four slots passed unticked
    tick.tick(rt)
    rt.clock.advance(timedelta(hours=3))
    parsed = samples(metrics.exposition(rt))
    assert value(parsed, "reportflow_missed_slots_total", schedule="m") == 4
    assert value(parsed, "reportflow_slots_not_run_total", schedule="m", reason="manual_required") == 4
    assert value(parsed, "reportflow_slots_not_run_total", schedule="m", reason="misfire") == 0
    assert value(parsed, "reportflow_runs_created_total", schedule="m", trigger="SCHEDULED") == 4
    assert value(parsed, "reportflow_oldest_pending_age_seconds") == 3 * 3600  # created by the tick 3 h ago
    assert value(parsed, "reportflow_schedule_oldest_pending_age_seconds", schedule="m") == 3 * 3600
    bulk_actions.execute(rt, bulk_actions.plan_approve(rt, "m"))
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    after = samples(metrics.exposition(rt))
    assert value(after, "reportflow_schedule_oldest_pending_age_seconds", schedule="m") == 0
    assert value(after, "reportflow_missed_slots_total", schedule="m") == 4  # a counter: approval does not undo it
    rt.store.dispose()


def test_runs_created_never_goes_down_when_a_prune_removes_runs(store_url: str) -> None:
    rt = make_runtime(store_url, clock=ManualClock(T0), schedules=[dict(name="d", project="p", **DAILY)])
    definitions.apply(rt)
    actions.backfill(rt, "d", first=date(2026, 9, 1), last=date(2026, 9, 10))
    actions.trigger(rt, "d", day=date(2026, 9, 28))
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    before = samples(metrics.exposition(rt))
    assert value(before, "reportflow_runs_created_total", schedule="d", trigger="BACKFILL") == 10
    assert value(before, "reportflow_runs_created_total", schedule="d", trigger="MANUAL") == 1
    assert prune.prune(rt, date(2026, 9, 6)).removed == 5
    after = samples(metrics.exposition(rt))
    assert value(after, "reportflow_runs", schedule="d", trigger="BACKFILL", status="SUCCESS") == 5
    assert value(after, "reportflow_runs_created_total", schedule="d", trigger="BACKFILL") == 10
    assert value(after, "reportflow_runs_created_total", schedule="d", trigger="MANUAL") == 1
    rt.store.dispose()


def test_runs_in_progress_stuck_late_held_undelivered_and_the_scheduler_beat(store_url: str) -> None:
    rt = make_runtime(store_url, clock=ManualClock(T0), schedules=[
        dict(name="a", project="pa", **DAILY), dict(name="b", project="pb", **DAILY)])
    definitions.apply(rt)  # next slots 2026-09-30 09:00
    rt.clock.set(datetime(2026, 9, 30, 9, 1, tzinfo=UTC))
    tick.tick(rt)  # a and b each queue their 09:00 run
    parsed = samples(metrics.exposition(rt))
    assert "reportflow_scheduler_beat_age_seconds" not in parsed  # no scheduler has beaten (yet)
    with rt.store.write() as conn:  # a worker takes a's run five minutes after its slot and keeps it
        taken = claims.acquire_run(conn, worker_id="slow", now=rt.clock.now() + timedelta(minutes=4),
                                   lease_until=rt.clock.now() + timedelta(hours=3), projects=["pa"],
                                   steps_by_workflow={"echo": ["ECHO"]}, backfill_limit=1)
        instances.beat(conn, instance_id="node-1:serve", role="serve", host="node-1", pid=1, projects=None,
                       now=rt.clock.now())
    assert taken is not None
    rt.clock.set(datetime(2026, 9, 30, 9, 50, tzinfo=UTC))  # b unclaimed 49 min; both past grace + max_runtime
    parsed = samples(metrics.exposition(rt))
    # a started 5 min after its slot and is still running: counted in the start delay, and in progress.
    assert value(parsed, "reportflow_start_delay_seconds_count", schedule="a") == 1
    assert value(parsed, "reportflow_start_delay_seconds_sum", schedule="a") == 300
    assert value(parsed, "reportflow_start_delay_seconds_count", schedule="b") == 0
    assert value(parsed, "reportflow_runs_in_progress", schedule="a") == 1
    assert value(parsed, "reportflow_run_in_progress_seconds", schedule="a") == 45 * 60
    assert value(parsed, "reportflow_run_duration_seconds_count", schedule="a") == 0
    assert value(parsed, "reportflow_stuck_runs", schedule="b") == 1  # QUEUED, unclaimed past stuck_after (30m)
    assert value(parsed, "reportflow_stuck_runs", schedule="a") == 0
    assert value(parsed, "reportflow_late_runs", schedule="a") == 1  # past 09:00 + 10m grace + 30m max_runtime
    assert value(parsed, "reportflow_late_runs", schedule="b") == 1
    assert value(parsed, "reportflow_scheduler_beat_age_seconds") == 49 * 60
    assert value(parsed, "reportflow_undelivered_alerts", schedule="b", state="pending") == 0
    assert value(parsed, "reportflow_stalled_runs") == 1  # a: 45 min, past its max_runtime of 30
    reconciler.sweep(rt)  # raises run_late for both, stalled for a, run_stuck for b
    with rt.store.write() as conn:
        [(row_id, _)] = [(i, a) for i, a in outbox.list_due(conn, rt.clock.now()) if a.event == "run_stuck"]
        outbox.mark_failed(conn, row_id, attempts=1, next_try_at=rt.clock.now() + timedelta(minutes=1),
                           error="HTTP 503")
    definitions.set_enabled(rt, "b", enabled=False, reason="repo move")
    parsed = samples(metrics.exposition(rt))
    assert value(parsed, "reportflow_undelivered_alerts", schedule="b", state="pending") == 1  # run_late
    assert value(parsed, "reportflow_undelivered_alerts", schedule="b", state="failing") == 1  # run_stuck
    assert value(parsed, "reportflow_undelivered_alerts", schedule="a", state="pending") == 2  # run_late, stalled
    assert value(parsed, "reportflow_held_runs", schedule="b") == 1
    assert value(parsed, "reportflow_held_runs", schedule="a") == 0
    rt.store.dispose()


def test_freshness_below_its_target_raises_freshness_low_once_per_period(store_url: str) -> None:
    """Hourly reports that run late (the machine was off): freshness 0 against a target of 95%."""
    spec = dict(name="h", project="p", workflow="echo", cron="0 * * * *", timezone="UTC",
                freshness_target="95% within 15m")
    rt = make_runtime(store_url, clock=ManualClock(T0), schedules=[spec], extra={"notify": {"slo_window": "1d"}})
    assert rt.config.schedules[0].freshness_target == 0.95
    assert rt.config.schedules[0].deadline == timedelta(minutes=15)
    definitions.apply(rt)  # next slot 11:00
    rt.clock.set(T0 + timedelta(hours=4, minutes=5))  # 14:05: 11:00 .. 14:00 caught up, 4 h to 5 min late
    tick.tick(rt)
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    rt.clock.set(T0 + timedelta(hours=4, minutes=30))  # 14:00 is due (14:15): four periods, only 14:00 fresh
    report = reconciler.sweep(rt)
    assert report.freshness_low == 1
    assert reconciler.sweep(rt).freshness_low == 0  # once per period
    with rt.store.read() as conn:
        [event] = [e for e in outbox.list_events(conn) if e.event == "freshness_low"]
    assert event.schedule == "h" and event.severity.value == "warning"
    assert event.summary == ("h: freshness 25% over the last 1d is below its target 95% (4 periods due; "
                             "judged at 2026-09-29T14:00Z)")
    assert event.details is not None and event.details["consecutive"] == 4 and event.details["target"] == 0.95
    parsed = samples(metrics.exposition(rt))
    assert value(parsed, "reportflow_schedule_freshness_target", schedule="h") == 0.95
    assert value(parsed, "reportflow_schedule_freshness_ratio", schedule="h") == 0.25
    rt.clock.set(T0 + timedelta(hours=5, minutes=1))  # 15:00 runs on time: 2 of 5 is still below 95%
    tick.tick(rt)
    assert [o.status for o in WorkerPool(rt, "w", concurrency=1).work(until_idle=True)] == [RunStatus.SUCCESS]
    rt.clock.set(T0 + timedelta(hours=5, minutes=20))
    assert reconciler.sweep(rt).freshness_low == 1  # the next period judged it low again
    rt.store.dispose()


def test_a_freshness_target_is_a_share_and_agrees_with_the_deadline(tmp_path: Path) -> None:
    base = dict(name="h", project="p", workflow="echo", cron="0 * * * *", timezone="UTC")
    url = f"sqlite:///{tmp_path / 'rf.db'}"
    for given, share in ((0.9, 0.9), ("90%", 0.9), ("99.5% within 1h", 0.995)):
        rt = make_runtime(url, schedules=[dict(base, freshness_target=given)])
        assert rt.config.schedules[0].freshness_target == share
        rt.store.dispose()
    for bad, says in ((1.5, "at most 1"), ("0%", "above 0"), ("soon", "is not a freshness target"),
                      ("95% within 30m", "freshness_target says within 30m but deadline is 1h")):
        with pytest.raises(errors.ConfigInvalid, match=says):
            make_runtime(url, schedules=[dict(base, freshness_target=bad, deadline="1h")])
