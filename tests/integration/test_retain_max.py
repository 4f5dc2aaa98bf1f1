"""SPEC §15.4: the daily prune deletes at most ``[store] retain_max`` runs; beyond it, none, and ``prune_held``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.core.clock import ManualClock
from engine.execution.pool import WorkerPool
from engine.operations import prune
from engine.scheduling import definitions, tick
from engine.store import outbox, run_rows
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


def test_a_daily_prune_over_retain_max_deletes_none_and_raises_prune_held(store_url: str, tmp_path: Path) -> None:
    spec = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
                misfire="CATCH_UP_ALL", overlap="ALLOW")
    rt = make_runtime(store_url, schedules=[spec], clock=ManualClock(T0), registry={"four_steps": FOUR_STEPS},
                      extra={"store": {"retain": "2d", "retain_max": 3}, "testflow": {"log": str(tmp_path / "log")}})
    assert rt.config.retain_max == 3
    definitions.apply(rt)
    rt.clock.set(T0 + timedelta(hours=4, minutes=1))
    tick.tick(rt)
    assert len(WorkerPool(rt, "w", concurrency=1).work(until_idle=True)) == 4  # 10:00 .. 13:00, SUCCESS
    rt.clock.set(T0 + timedelta(days=10))
    held = prune.RetentionTimer(rt.config.retain, rt.config.retain_max).maybe_prune(rt)
    assert held is not None and held.removed == 4 and held.dry_run
    with rt.store.read() as conn:
        assert len(run_rows.list_runs(conn)) == 4  # deleted none
        [event] = outbox.list_events(conn)
    assert event.event == "prune_held" and event.severity.value == "warning"
    assert event.details == {"count": 4, "retain_max": 3, "oldest_period": "2026-09-29",
                             "before": held.before.isoformat()}
    # Within the limit the same daily prune deletes them.
    done = prune.RetentionTimer(rt.config.retain, 4).maybe_prune(rt)
    assert done is not None and done.removed == 4 and not done.dry_run
    with rt.store.read() as conn:
        assert run_rows.list_runs(conn) == []
        assert [e.event for e in outbox.list_events(conn)] == ["prune_held"]
