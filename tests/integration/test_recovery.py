"""Recovery and hand-back attempts (SPEC §1, §5), in-process on SQLite and PostgreSQL with a manual clock."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

from engine.core.models import RunStatus
from engine.execution import reconciler
from engine.execution.worker import Worker
from engine.operations import actions
from engine.read import views
from engine.runtime import Runtime
from engine.store import claims
from tests.flows.testflows import FOUR_STEPS
from tests.integration.test_worker import FLOWS, SPEC, T0, config, lines, queue_one, show
from tests.support import RuntimeFactory, run_next


def _claim_and_die(rt: Runtime, worker_id: str = "dead") -> None:
    """A worker claims the run (step ONE starts) and is never heard from again."""
    now = rt.clock.now()
    with rt.store.write() as conn:
        claim = claims.acquire_run(conn, worker_id=worker_id, now=now, lease_until=now + timedelta(seconds=60),
                                   steps_by_workflow={"four_steps": FOUR_STEPS.step_names()}, projects=None,
                                   backfill_limit=1)
    assert claim is not None


def _attempts(rt: Runtime, run_id: int) -> list[tuple[int, str, str | None, str]]:
    return [(a.number, a.trigger.value, a.from_step, a.outcome.value) for a in show(rt, run_id).attempts]


def test_reconciler_writes_the_recovery_attempt_at_once_and_the_claiming_worker_continues_it(
        store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    run_id = queue_one(rt)
    _claim_and_die(rt)
    rt.clock.advance(timedelta(seconds=61))
    assert reconciler.sweep(rt).recovered == [run_id]
    # Visible before any worker takes it, in the model and in `runs show --json`.
    assert _attempts(rt, run_id) == [(1, "scheduled", "ONE", "lost"), (2, "recovery", "ONE", "pending")]
    shown = views.run_detail(show(rt, run_id), rt.clock.now())
    assert shown["status"] == "RETRY_PENDING"
    assert [(a["trigger"], a["outcome"], a["worker_id"]) for a in shown["attempts"]] == [
        ("scheduled", "lost", "dead"), ("recovery", "pending", None)]
    outcome = Worker(rt, "rescuer").run_one()
    assert outcome is not None and outcome.status is RunStatus.SUCCESS
    run = show(rt, run_id)
    assert _attempts(rt, run_id) == [(1, "scheduled", "ONE", "lost"), (2, "recovery", "ONE", "success")]
    assert run.attempts[1].worker_id == "rescuer" and run.attempts[1].started_at == rt.clock.now()
    assert run.attempt_count == 2


def test_cancel_before_a_worker_takes_the_recovery_closes_it_cancelled(store_url: str, tmp_path: Path,
                                                                       runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    run_id = queue_one(rt)
    _claim_and_die(rt)
    rt.clock.advance(timedelta(seconds=61))
    reconciler.sweep(rt)
    assert actions.cancel(rt, run_id).status == "CANCELLED"
    assert _attempts(rt, run_id) == [(1, "scheduled", "ONE", "lost"), (2, "recovery", "ONE", "cancelled")]
    assert Worker(rt, "w").run_one() is None
    # A later retry is a new attempt after the closed one, never a reuse of its number.
    actions.retry(rt, run_id)
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert _attempts(rt, run_id) == [(1, "scheduled", "ONE", "lost"), (2, "recovery", "ONE", "cancelled"),
                                     (3, "manual", "ONE", "success")]


def test_retry_before_a_worker_takes_the_recovery_supersedes_it(store_url: str, tmp_path: Path,
                                                                runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    run_id = queue_one(rt)
    _claim_and_die(rt)
    rt.clock.advance(timedelta(seconds=61))
    reconciler.sweep(rt)
    actions.retry(rt, run_id)
    attempts = show(rt, run_id).attempts
    assert [(a.number, a.trigger.value, a.outcome.value) for a in attempts] == [
        (1, "scheduled", "lost"), (2, "recovery", "superseded")]
    assert attempts[1].finished_at == rt.clock.now() and "manual" in (attempts[1].error_message or "")
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert _attempts(rt, run_id)[-1] == (3, "manual", "ONE", "success")
    assert show(rt, run_id).attempt_count == 3


def test_recovery_that_spends_the_budget_fails_without_a_pending_attempt(store_url: str, tmp_path: Path,
                                                                         runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    run_id = queue_one(rt)
    for _ in range(3):
        _claim_and_die(rt)
        rt.clock.advance(timedelta(seconds=61))
        reconciler.sweep(rt)
    run = show(rt, run_id)
    assert run.status is RunStatus.FAILED
    assert [(a.trigger.value, a.outcome.value) for a in run.attempts] == [
        ("scheduled", "lost"), ("recovery", "lost"), ("recovery", "lost")]


def test_graceful_stop_hands_the_run_back_with_a_handback_attempt(store_url: str, tmp_path: Path,
                                                                  runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS,
                 config=config(tmp_path, block_on=["TWO"]), apply=True)
    log = tmp_path / "steps.log"
    run_id = queue_one(rt)
    stopping = Worker(rt, "stopping")
    result: dict[str, object] = {}
    thread = threading.Thread(target=lambda: result.update(outcome=stopping.run_one()))
    thread.start()
    entered = threading.Event()
    while not lines(log, "start")["TWO"] and thread.is_alive():
        entered.wait(0.01)
    stopping.stop.set()  # what SIGTERM does
    (tmp_path / "gate").touch()
    thread.join(timeout=60)
    assert result["outcome"].status is RunStatus.QUEUED  # type: ignore[attr-defined]
    assert run_next(Worker(rt, "next")).status is RunStatus.SUCCESS
    assert _attempts(rt, run_id) == [(1, "scheduled", "ONE", "released"), (2, "handback", "THREE", "success")]
