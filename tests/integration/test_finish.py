"""Every way a run ends has every after-effect (``store.finish.finish_run``), on SQLite and PostgreSQL.

The ways: the worker (a failure, a cancel seen at a step boundary, a child's success), the
reconciler (a lease that expired), a worker id that restarts (``reclaim_own``), an operator's
cancel (of a QUEUED, a RUNNING and a WAITING run). The after-effects: the lease released, the
attempt closed, the schedule's next PENDING run queued, a WAITING parent queued, the alert
recorded exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core.models import AttemptOutcome, PeriodKind, Run, RunStatus
from engine.execution import reconciler
from engine.execution.worker import Worker
from engine.operations import actions
from engine.plugins.contract import StepContext, StepResult, StepSpec, WorkflowDef
from engine.runtime import Runtime
from engine.scheduling import tick
from engine.store import outbox, run_rows
from tests.flows import family
from tests.flows.testflows import FOUR_STEPS
from tests.support import ManualRuntime, RuntimeFactory, run_next

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


def _fan_out_to(child: str, workflow: str) -> Callable[[StepContext], StepResult]:
    def split(ctx: StepContext) -> StepResult:
        ctx.start_child(child, workflow, {"item": child, "n": 1})
        return StepResult(output={})
    return split


def _join(ctx: StepContext) -> StepResult:
    return StepResult(output={"children": [c.status.value for c in ctx.children()]})


def _family_flow(name: str, child: str, workflow: str) -> WorkflowDef:
    return WorkflowDef(name=name, period=PeriodKind.SLOT, load_settings=family.load, sections=("familyflow",),
                       steps=(StepSpec("SPLIT", _fan_out_to(child, workflow), timeout_s=60),
                              StepSpec("JOIN", _join, timeout_s=60)))


# top fans out into mid, mid into a leaf (``four_steps``): a WAITING run that is itself a child.
TOP = _family_flow("fin_top", "mid", "fin_mid")
MID = _family_flow("fin_mid", "leaf", "four_steps")


def _applied(runtime: RuntimeFactory, url: str, tmp_path: Path, schedule: dict[str, Any]) -> ManualRuntime:
    """``schedule`` applied at ``T0``; its TWO step fails once, and every run has one attempt."""
    return runtime(url, schedules=[schedule], at=T0,
                   workflows={"four_steps": FOUR_STEPS, "fin_top": TOP, "fin_mid": MID},
                   config={"testflow": {"log": str(tmp_path / "steps.log"), "fail": {"TWO": 1},
                                        "fail_code": "GIT_REPO_NOT_FOUND"},
                           "familyflow": {}, "worker": {"max_attempts": 1, "lease": "60s"}}, apply=True)


def _run(rt: Runtime, run_id: int) -> Run:
    with rt.store.read() as conn:
        return run_rows.get_run(conn, run_id)


def _alerts(rt: Runtime, run_id: int) -> list[str]:
    with rt.store.read() as conn:
        return [e.event for e in outbox.list_events(conn) if e.run_id == run_id]


def _two_slots(runtime: RuntimeFactory, url: str, tmp_path: Path) -> tuple[ManualRuntime, int, int]:
    """A schedule whose 10:00 run is QUEUED and whose 11:00 run waits PENDING behind it (QUEUE_NEW)."""
    rt = _applied(runtime, url, tmp_path, dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *",
                                               timezone="UTC", misfire="CATCH_UP_ALL", overlap="QUEUE_NEW"))
    rt.clock.set(T0 + timedelta(hours=2, minutes=1))
    tick.tick(rt)
    with rt.store.read() as conn:
        first, second = sorted(run_rows.list_runs(conn), key=lambda r: r.scheduled_for)
    assert (first.status, second.status) == (RunStatus.QUEUED, RunStatus.PENDING)
    return rt, first.id, second.id


def _family(runtime: RuntimeFactory, url: str, tmp_path: Path) -> tuple[ManualRuntime, Worker, dict[str, int]]:
    """top WAITING for mid, mid WAITING for leaf, leaf QUEUED."""
    rt = _applied(runtime, url, tmp_path, dict(name="fam", workflow="fin_top", project="p1", cron="0 * * * *",
                                               timezone="UTC", misfire="RUN_ONCE", overlap="SKIP_NEW"))
    rt.clock.set(T0 + timedelta(hours=1, minutes=1))
    tick.tick(rt)
    worker = Worker(rt, "w")
    assert [run_next(worker).status for _ in range(2)] == [RunStatus.WAITING] * 2
    with rt.store.read() as conn:
        ids = {r.workflow: r.id for r in run_rows.list_runs(conn)}
    found = {"top": ids["fin_top"], "mid": ids["fin_mid"], "leaf": ids["four_steps"]}
    assert _run(rt, found["leaf"]).status is RunStatus.QUEUED
    return rt, worker, found


# --- the ways a run ends: each takes a QUEUED run (its worker, when it needs one, is "w") -----------

def _worker_ends_it(rt: Runtime, run_id: int) -> None:
    outcome = Worker(rt, "w").run_one()
    assert outcome is not None and outcome.run_id == run_id


def _lost_then_swept(rt: ManualRuntime, run_id: int) -> None:
    claim = Worker(rt, "dead").claim()  # claimed, then never heard from again
    assert claim is not None and claim.run.id == run_id
    rt.clock.advance(LEASE + timedelta(seconds=1))
    assert run_id in reconciler.sweep(rt).failed  # max_attempts 1: the lost attempt was the last


def _lost_then_reclaimed(rt: Runtime, run_id: int) -> None:
    claim = Worker(rt, "w").claim()
    assert claim is not None and claim.run.id == run_id
    assert reconciler.reclaim_own(rt, "w") == [run_id]  # the same worker id, restarted


def _cancelled_queued(rt: Runtime, run_id: int) -> None:
    assert actions.cancel(rt, run_id).action == "cancelled"


def _cancelled_running(rt: Runtime, run_id: int) -> None:
    worker = Worker(rt, "w")
    claim = worker.claim()
    assert claim is not None and claim.run.id == run_id
    assert actions.cancel(rt, run_id).action == "cancel_requested"
    assert worker.execute(claim).status is RunStatus.CANCELLED  # at its first step boundary


ENDS = {"worker": _worker_ends_it, "reconciler": _lost_then_swept, "reclaim": _lost_then_reclaimed,
        "cancel_queued": _cancelled_queued, "cancel_running": _cancelled_running}
# How each way leaves the flat schedule's first run (its step TWO fails once, with max_attempts 1).
FLAT = {"worker": (RunStatus.FAILED, [AttemptOutcome.FAILED], ["run_failed"]),
        "reconciler": (RunStatus.FAILED, [AttemptOutcome.LOST], ["run_failed"]),
        "reclaim": (RunStatus.FAILED, [AttemptOutcome.LOST], ["run_failed"]),
        "cancel_queued": (RunStatus.CANCELLED, [], []),
        "cancel_running": (RunStatus.CANCELLED, [AttemptOutcome.CANCELLED], [])}


@pytest.mark.parametrize("how", list(ENDS))
def test_a_run_that_ends_frees_its_lease_closes_its_attempt_queues_the_next_and_alerts_once(
        store_url: str, tmp_path: Path, how: str, runtime: RuntimeFactory) -> None:
    rt, first, second = _two_slots(runtime, store_url, tmp_path)
    ENDS[how](rt, first)
    status, outcomes, alerts = FLAT[how]
    run = _run(rt, first)
    assert run.status is status and run.completed_at == rt.clock.now()
    assert (run.lease_owner, run.lease_until) == (None, None)  # the lease released
    assert [a.outcome for a in run.attempts] == outcomes  # the attempt closed, with what happened
    assert all(a.finished_at is not None for a in run.attempts)
    assert _run(rt, second).status is RunStatus.QUEUED  # the schedule's next run promoted
    assert _alerts(rt, first) == alerts
    reconciler.sweep(rt)  # a later pass raises nothing again
    assert _alerts(rt, first) == alerts


# The leaf's end as each way leaves it: what its parent's fan-in then reads.
LEAF = {how: status for how, (status, _, _) in FLAT.items()}


@pytest.mark.parametrize("how", list(ENDS))
def test_a_childs_end_queues_its_waiting_parent_at_once(store_url: str, tmp_path: Path, how: str,
                                                        runtime: RuntimeFactory) -> None:
    rt, worker, ids = _family(runtime, store_url, tmp_path)
    ENDS[how](rt, ids["leaf"])
    assert _run(rt, ids["leaf"]).status is LEAF[how]
    assert _run(rt, ids["mid"]).status is RunStatus.QUEUED  # in the same transaction, not a sweep later
    assert _alerts(rt, ids["leaf"]) == []  # a child's failure is its parent's alert
    outcome = worker.run_one()  # the fan-in reads how the leaf ended
    assert outcome is not None and outcome.run_id == ids["mid"]
    assert _run(rt, ids["mid"]).steps[1].output == {"children": [LEAF[how].value]}


def test_cancelling_a_waiting_child_cancels_its_children_and_queues_its_own_parent(
        store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt, worker, ids = _family(runtime, store_url, tmp_path)
    assert actions.cancel(rt, ids["mid"]).action == "cancelled"
    assert _run(rt, ids["leaf"]).status is RunStatus.CANCELLED
    mid = _run(rt, ids["mid"])
    assert mid.status is RunStatus.CANCELLED and mid.completed_at == rt.clock.now()
    assert _run(rt, ids["top"]).status is RunStatus.QUEUED  # before: WAITING until the reconciler's next sweep
    outcome = worker.run_one()
    assert outcome is not None and outcome.run_id == ids["top"]
    assert _run(rt, ids["top"]).steps[1].output == {"children": ["CANCELLED"]}
