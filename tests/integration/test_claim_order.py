"""The claim reads the queue in its own order: its cost does not grow with the queue (SPEC §11)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from sqlalchemy import event

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.core.run_end import RunOutcome
from engine.execution.worker import Worker
from engine.runtime import Runtime
from engine.scheduling import definitions, tick
from tests.support import make_runtime

T0 = datetime(2026, 9, 29, 0, 0, tzinfo=UTC)


def claim_and_plan(rt: Runtime) -> tuple[RunOutcome | None, list[str]]:
    """One claim and run by a worker on SQLite, and the claim's query plan as SQLite ran it."""
    issued: list[str] = []

    @event.listens_for(rt.store.engine, "connect")
    def _traced(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        dbapi_connection.set_trace_callback(issued.append)  # the SQL as SQLite ran it, values inlined

    rt.store.engine.dispose()
    worker = Worker(rt, "w")
    first = worker.run_one()
    worker.close()
    claim = next(sql for sql in issued if "FROM runs INDEXED BY" in sql)
    with rt.store.read() as conn:
        return first, [row[3] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {claim}")]


def test_the_sqlite_claim_walks_the_claim_order_index_without_sorting_the_queue(sqlite_url: str) -> None:
    spec = dict(name="e", workflow="echo", project="p", cron="* * * * *", timezone="UTC", allow_frequent=True,
                overlap="ALLOW", misfire="CATCH_UP_ALL")
    clock = ManualClock(T0)
    rt = make_runtime(sqlite_url, schedules=[spec], clock=clock)
    definitions.apply(rt)
    clock.advance(timedelta(minutes=300))
    assert tick.tick(rt).created == {RunStatus.QUEUED.value: 300}
    first, plan = claim_and_plan(rt)
    assert first is not None and first.key == "echo:p:2026-09-29T00:01Z"  # the oldest slot first
    assert plan[0] == "SCAN runs USING INDEX ix_runs_claim_order", plan
    assert not any("TEMP B-TREE" in step for step in plan), plan  # no sort of the whole queue per claim
