"""``start_by``: a scheduled run queued on time but not started by slot + start_by is MISSED, not run hours late."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution import reconciler
from engine.execution.worker import Worker
from engine.operations import actions
from engine.scheduling import definitions, tick
from engine.store import audit_rows, outbox, run_rows
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime, run_next

T0 = datetime(2026, 9, 29, 8, 0, tzinfo=UTC)


def queued_at_nine(store_url: str, tmp_path: Path) -> Any:
    """A daily 09:00 schedule with ``start_by = "2h"``, its 09:00 run queued by the tick at 09:00:30."""
    spec = dict(name="morning", workflow="four_steps", project="p1", cron="0 9 * * *", timezone="UTC",
                start_by="2h")
    rt = make_runtime(store_url, schedules=[spec], clock=ManualClock(T0), registry={"four_steps": FOUR_STEPS},
                      extra={"testflow": {"log": str(tmp_path / "log")}})
    definitions.apply(rt)
    rt.clock.set(T0 + timedelta(hours=1, seconds=30))
    tick.tick(rt)
    return rt


def test_a_run_not_started_by_its_start_by_is_missed_and_alerted_once(store_url: str, tmp_path: Path) -> None:
    rt = queued_at_nine(store_url, tmp_path)
    rt.clock.set(T0 + timedelta(hours=2, minutes=59))  # 10:59: within start_by, the sweep leaves it queued
    assert reconciler.sweep(rt).missed == []
    rt.clock.set(T0 + timedelta(hours=3, minutes=1))  # 11:01: nobody started it in two hours
    first = reconciler.sweep(rt)
    assert len(first.missed) == 1 and reconciler.sweep(rt).missed == []
    assert Worker(rt, "w").run_one() is None  # it is not run at 11:01
    with rt.store.read() as conn:
        (run,) = run_rows.list_runs(conn)
        events = [e for e in outbox.list_events(conn) if e.event == "slots_not_run"]
        audit = [e.action for e in audit_rows.list_audit(conn, run_id=run.id)]
    assert (run.status, run.reason) == (RunStatus.MISSED, "start_by")
    assert len(events) == 1 and "start_by" in events[0].summary and "run_missed" in audit
    actions.retry(rt, run.id)  # an operator who still wants it
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS


def test_a_worker_applies_start_by_at_claim_without_the_reconciler(store_url: str, tmp_path: Path) -> None:
    """Issue 43, item 1: with ``tick`` then ``work`` (no reconciler pass), a run ran 6 days late; under ``serve`` one
    ran 3.5 h past a 2 h ``start_by``. A claim now records it MISSED, alerted once, and takes the next run."""
    rt = queued_at_nine(store_url, tmp_path)
    rt.clock.set(T0 + timedelta(hours=4, minutes=30))  # 12:30: 3.5 h after its slot, a worker comes by
    assert Worker(rt, "w").run_one() is None  # not run: MISSED at the claim
    with rt.store.read() as conn:
        (run,) = run_rows.list_runs(conn)
        events = [e for e in outbox.list_events(conn) if e.event == "slots_not_run"]
    assert (run.status, run.reason, run.started_at) == (RunStatus.MISSED, "start_by", None)
    assert len(events) == 1 and reconciler.sweep(rt).missed == []  # nothing left for the reconciler, no 2nd alert
    rt.clock.set(T0 + timedelta(days=1, hours=1, seconds=30))  # the next day's slot, on time: it runs
    tick.tick(rt)
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
