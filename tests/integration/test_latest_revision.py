"""``trigger`` and ``backfill`` look at a period's latest revision only (SPEC §12, issue 21 item 5)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from pathlib import Path

from engine.core.clock import ManualClock
from engine.core.models import PeriodKind, RunStatus
from engine.execution.pool import WorkerPool
from engine.operations import actions
from engine.scheduling import definitions
from engine.store import run_rows
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime

DAILY = dataclasses.replace(FOUR_STEPS, name="four_daily", period=PeriodKind.DAY)


def test_backfill_leaves_r1_alone_once_a_forced_r2_succeeded(store_url: str, tmp_path: Path) -> None:
    spec = dict(name="cd", workflow="four_daily", project="p1", cron="30 19 * * *", timezone="UTC")
    rt = make_runtime(store_url, schedules=[spec], clock=ManualClock(datetime(2026, 8, 20, 12, tzinfo=UTC)),
                      registry={"four_daily": DAILY}, extra={"testflow": {"log": str(tmp_path / "log")}})
    definitions.apply(rt)
    r1 = actions.trigger(rt, "cd", day=date(2026, 8, 10))
    actions.cancel(rt, r1.run_id)  # r1 CANCELLED: a status backfill re-queues when it is the latest
    r2 = actions.trigger(rt, "cd", day=date(2026, 8, 10), force_new=True)
    assert r2.action == "revision"
    assert WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    report = actions.backfill(rt, "cd", first=date(2026, 8, 9), last=date(2026, 8, 11))
    assert report.present == ["2026-08-10"] and report.requeued == []
    assert report.created == ["2026-08-09", "2026-08-11"]
    with rt.store.read() as conn:
        revisions = run_rows.find_period_runs(conn, "four_daily", "p1", "2026-08-10")
    assert [(r.revision, r.status) for r in revisions] == [(1, RunStatus.CANCELLED), (2, RunStatus.SUCCESS)]
    # trigger agrees: the period is done, whatever r1 says.
    again = actions.trigger(rt, "cd", day=date(2026, 8, 10))
    assert (again.action, again.run_id) == ("unchanged", r2.run_id)
