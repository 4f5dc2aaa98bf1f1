"""A schedule's ``priority`` orders claims before the trigger does (SPEC §18), and the claim stays on its index."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection

from engine.core.clock import ManualClock
from engine.core.schedule_spec import SchedulePriority
from engine.execution.worker import Worker
from engine.operations import actions
from engine.runtime import Runtime
from engine.scheduling import definitions, tick
from tests.integration import test_claim_order
from tests.support import make_runtime

T0 = datetime(2026, 9, 29, 0, 0, tzinfo=UTC)


def hourly(name: str, project: str, **extra: Any) -> dict[str, Any]:
    return dict(name=name, workflow="echo", project=project, cron="0 * * * *", timezone="UTC", **extra)


def claimed_keys(rt: Runtime) -> list[str]:
    worker = Worker(rt, "w")
    keys = []
    while (outcome := worker.run_one()) is not None:
        keys.append(outcome.key)
    worker.close()
    return keys


def test_a_critical_schedules_run_is_claimed_before_a_low_schedules_manual_run(store_url: str) -> None:
    clock = ManualClock(T0)
    rt = make_runtime(store_url, clock=clock, schedules=[
        hourly("low", "p1", priority="low"), hourly("plain", "p2"), hourly("urgent", "p3", priority="critical")])
    definitions.apply(rt)
    clock.advance(timedelta(hours=1))
    tick.tick(rt)  # one SCHEDULED run each, for the same slot
    actions.trigger(rt, "low", day=date(2026, 9, 28))  # MANUAL, yesterday: the trigger alone would put it first
    actions.trigger(rt, "plain", day=date(2026, 9, 28))
    assert claimed_keys(rt) == [
        "echo:p3:2026-09-29T01:00Z",  # critical
        "echo:p2:2026-09-28T00:00Z", "echo:p2:2026-09-29T01:00Z",  # normal: MANUAL before SCHEDULED
        "echo:p1:2026-09-28T00:00Z", "echo:p1:2026-09-29T01:00Z",  # low
    ]
    rt.store.dispose()


def test_a_changed_priority_reaches_the_runs_already_waiting(store_url: str) -> None:
    clock = ManualClock(T0)
    rt = make_runtime(store_url, clock=clock, schedules=[hourly("a", "p1"), hourly("b", "p2")])
    definitions.apply(rt)
    clock.advance(timedelta(hours=3))
    tick.tick(rt)  # three runs each, a's and b's slots interleaved in the claim order
    raised = dataclasses.replace(rt.config, schedules=(rt.config.schedules[0],
                                                       dataclasses.replace(rt.config.schedules[1], priority=SchedulePriority.HIGH)))
    rt = dataclasses.replace(rt, config=raised)
    assert definitions.apply(rt).updated == ["b"]
    assert [key.split(":")[1] for key in claimed_keys(rt)] == ["p2"] * 3 + ["p1"] * 3
    rt.store.dispose()


CAPS = {"limits": {"max_running": 8, "workflows": {"echo": 4}}}  # the caps' subqueries in the plan too


def queue_of_2400(url: str) -> Runtime:
    clock = ManualClock(T0)
    rt = make_runtime(url, clock=clock, extra=CAPS, schedules=[
        hourly(f"s{i}", f"p{i}", priority=["low", "normal", "high", "critical"][i % 4]) for i in range(20)])
    definitions.apply(rt)
    clock.advance(timedelta(days=5))
    tick.tick(rt)
    return rt


def test_the_sqlite_claim_with_priorities_and_caps_walks_the_claim_order_index(sqlite_url: str) -> None:
    rt = queue_of_2400(sqlite_url)
    first, plan = test_claim_order.claim_and_plan(rt)
    assert first is not None and first.key.startswith("echo:p3:")  # critical, oldest slot
    assert "SCAN runs USING INDEX ix_runs_claim_order" in plan, plan
    assert not any("TEMP B-TREE" in step for step in plan), plan  # no sort of the whole queue per claim
    rt.store.dispose()


@pytest.mark.postgres
def test_the_postgresql_claim_walks_the_claim_order_index_without_sorting(pg_url: str) -> None:
    rt = queue_of_2400(pg_url)
    with rt.store.write() as conn:
        conn.exec_driver_sql("ANALYZE runs")
    issued: list[tuple[str, Any]] = []

    @event.listens_for(rt.store.engine, "before_cursor_execute")
    def _traced(conn: Connection, cursor: object, statement: str, parameters: Any, context: object,
                executemany: bool) -> None:
        if "FOR UPDATE" in statement:
            issued.append((statement, parameters))

    worker = Worker(rt, "w")
    first = worker.run_one()
    worker.close()
    assert first is not None and first.key.startswith("echo:p3:")  # critical, oldest slot
    statement, parameters = issued[0]
    with rt.store.read() as conn:
        plan = [row[0] for row in conn.exec_driver_sql(f"EXPLAIN {statement}", parameters)]
    assert any("Index Scan using ix_runs_claim_order on runs" in line for line in plan), plan
    assert not any(line.strip().lstrip("->").strip().startswith("Sort") for line in plan), plan
    rt.store.dispose()
