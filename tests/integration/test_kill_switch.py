"""The kill switch (SPEC §15.3, issue 21 item 3): a disabled schedule's unstarted runs are held."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime

import pytest

from engine.core import errors
from engine.core.models import HELD_BY_DISABLED, RunStatus
from engine.execution.pool import WorkerPool
from engine.execution.worker import Worker
from engine.operations import actions
from engine.read import run_queries, views
from engine.runtime import Runtime
from engine.scheduling import definitions
from engine.store import audit_rows, run_rows, schedule_rows
from tests.dbstate import fingerprint
from tests.support import RuntimeFactory

NOW = datetime(2026, 10, 1, 12, tzinfo=UTC)
ECHO = [dict(name="cd", workflow="echo", project="p1", cron="0 9 * * *", timezone="UTC"),
        dict(name="other", workflow="echo", project="p2", cron="0 9 * * *", timezone="UTC")]


def _queue_work(rt: Runtime) -> list[int]:
    """Three backfill runs and a manual one (ahead of them), in the order a worker would claim them."""
    actions.backfill(rt, "cd", first=date(2026, 9, 25), last=date(2026, 9, 27))
    actions.trigger(rt, "cd", day=date(2026, 9, 28))
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, "cd")
        return [r.id for r in run_rows.unstarted_runs(conn, schedule.id)]


def test_disable_holds_unstarted_runs_and_enable_releases_them_in_their_old_order(store_url: str,
                                                                                  runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=ECHO, at=NOW, apply=True)
    order = _queue_work(rt)
    assert len(order) == 4
    definitions.set_enabled(rt, "cd", enabled=False, reason="repo migration")
    assert WorkerPool(rt, "w", concurrency=1).work(until_idle=True) == []
    listed = run_queries.list_runs(rt, statuses=[], schedule="cd", limit=0)
    assert {r.status for r in listed} == {RunStatus.QUEUED}
    assert {views.run_summary(r, NOW)["held"] for r in listed} == {HELD_BY_DISABLED}
    assert views.run_detail(run_queries.get_run(rt, order[0]), NOW)["held"] == "schedule disabled"
    definitions.set_enabled(rt, "cd", enabled=True, reason="migrated")
    assert run_queries.get_run(rt, order[0]).held is None
    claimed = []
    worker = Worker(rt, "w")
    while (outcome := worker.run_one()) is not None:
        claimed.append(outcome.run_id)
    assert claimed == order


def test_a_running_run_is_not_interrupted_by_disable(store_url: str, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=ECHO, at=NOW, apply=True)
    first, *rest = _queue_work(rt)
    worker = Worker(rt, "w")
    claim = worker.claim()
    assert claim is not None and claim.run.id == first
    definitions.set_enabled(rt, "cd", enabled=False, reason="stop")
    assert run_queries.get_run(rt, first).held is None
    assert worker.execute(claim).status is RunStatus.SUCCESS
    assert [run_queries.get_run(rt, r).status for r in rest] == [RunStatus.QUEUED] * 3


def test_other_schedules_keep_running_while_one_is_held(store_url: str, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=ECHO, at=NOW, apply=True)
    _queue_work(rt)
    other = actions.trigger(rt, "other", day=date(2026, 9, 28))
    definitions.set_enabled(rt, "cd", enabled=False, reason="stop")
    assert [o.run_id for o in WorkerPool(rt, "w", concurrency=1).work(until_idle=True)] == [other.run_id]


@pytest.mark.parametrize("command", ["trigger", "backfill", "retry"])
def test_trigger_backfill_and_retry_on_a_disabled_schedule_exit_3_and_write_nothing(
        store_url: str, command: str, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=ECHO, at=NOW, apply=True)
    done = actions.trigger(rt, "cd", day=date(2026, 9, 20))
    actions.cancel(rt, done.run_id)
    definitions.set_enabled(rt, "cd", enabled=False, reason="repo migration")
    before = fingerprint(store_url)
    with pytest.raises(errors.Conflict, match="schedule 'cd' is disabled") as refused:
        if command == "trigger":
            actions.trigger(rt, "cd", day=date(2026, 9, 28))
        elif command == "backfill":
            actions.backfill(rt, "cd", first=date(2026, 9, 25), last=date(2026, 9, 27))
        else:
            actions.retry(rt, done.run_id)
    assert refused.value.exit_code == 3
    assert fingerprint(store_url) == before


def test_cancel_queued_cancels_instead_and_audits_each_with_the_reason(store_url: str, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=ECHO, at=NOW, apply=True)
    order = _queue_work(rt)
    definitions.set_enabled(rt, "cd", enabled=False, reason="bad data", cancel_queued=True)
    assert [run_queries.get_run(rt, r).status for r in order] == [RunStatus.CANCELLED] * 4
    with rt.store.read() as conn:
        events = [e for e in audit_rows.list_audit(conn) if e.action == "run_cancelled"]
    assert Counter(e.run_id for e in events) == Counter(order)
    assert {e.reason for e in events} == {"bad data"}


def test_disable_all_is_the_global_switch(store_url: str, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=ECHO, at=NOW, apply=True)
    _queue_work(rt)
    actions.trigger(rt, "other", day=date(2026, 9, 28))
    changed = definitions.disable_all(rt, reason="incident 42")
    assert sorted(s.name for s in changed) == ["cd", "other"]
    assert WorkerPool(rt, "w", concurrency=1).work(until_idle=True) == []
    with rt.store.read() as conn:
        assert {s.disabled_reason for s in schedule_rows.list_schedules(conn)} == {"incident 42"}
