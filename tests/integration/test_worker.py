"""The worker and the reconciler in-process, on SQLite and PostgreSQL, with a manual clock."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core import errors
from engine.core.models import Run, RunStatus, StepStatus
from engine.core.run_end import RunOutcome
from engine.execution import reconciler
from engine.execution.pool import WorkerPool
from engine.execution.worker import Worker
from engine.operations import actions
from engine.plugins.workflow_registry import load_registry
from engine.runtime import Runtime
from engine.scheduling import definitions, tick
from engine.store import claims, run_rows
from tests.flows.testflows import FOUR_STEPS
from tests.support import ManualRuntime, RuntimeFactory, make_runtime, run_next

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


SPEC = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
            misfire="CATCH_UP_ALL", overlap="ALLOW")
FLOWS = {"four_steps": FOUR_STEPS}


def config(tmp_path: Path, **flow: object) -> dict[str, Any]:
    """The test flow's settings (its log, its gate, what fails) and a worker with a 60 s lease."""
    settings = {"log": str(tmp_path / "steps.log"), "gate": str(tmp_path / "gate"), **flow}
    return {"testflow": settings, "worker": {"retry_backoff": "1m", "lease": "60s"}}


def lines(log: Path, kind: str) -> Counter[str]:
    if not log.exists():
        return Counter()
    return Counter(" ".join(line.split()[2:3]) for line in log.read_text().splitlines() if line.startswith(kind))


def queue_one(rt: ManualRuntime) -> int:
    rt.clock.set(T0 + timedelta(hours=1, minutes=1))
    tick.tick(rt)
    with rt.store.read() as conn:
        (run,) = run_rows.list_runs(conn)
    return run.id


def show(rt: Runtime, run_id: int) -> Run:
    with rt.store.read() as conn:
        return run_rows.get_run(conn, run_id)


def test_third_step_fails_twice_then_succeeds(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS,
                 config=config(tmp_path, fail={"THREE": 2}), apply=True)
    log = tmp_path / "steps.log"
    run_id = queue_one(rt)
    worker = Worker(rt, "w1")
    first = worker.run_one()
    assert first is not None and first.status is RunStatus.RETRY_PENDING and first.error_code == "MODEL_UNAVAILABLE"
    assert worker.run_one() is None  # not before the backoff has passed
    rt.clock.advance(timedelta(minutes=1, seconds=1))
    assert run_next(worker).status is RunStatus.RETRY_PENDING
    rt.clock.advance(timedelta(minutes=4, seconds=1))
    assert run_next(worker).status is RunStatus.SUCCESS
    ends = lines(log, "end")
    assert ends == {"ONE": 1, "TWO": 1, "THREE": 1, "FOUR": 1}
    run = show(rt, run_id)
    assert run.status is RunStatus.SUCCESS and run.attempt_count == 3
    assert [a.trigger.value for a in run.attempts] == ["scheduled", "auto", "auto"]
    assert [a.from_step for a in run.attempts] == ["ONE", "THREE", "THREE"]
    assert [a.outcome.value for a in run.attempts] == ["retry", "retry", "success"]
    # Steps after ONE saw the persisted outputs of the steps before them.
    assert (run.steps[3].output or {})["seen"] == {"ONE": f"ONE@{run_id}", "TWO": f"TWO@{run_id}",
                                           "THREE": f"THREE@{run_id}"}
    assert {a.kind for a in run.artifacts} == {"marker"} and len(run.artifacts) == 4


def test_retries_exhausted_fail_and_a_manual_retry_starts_a_fresh_budget(store_url: str, tmp_path: Path,
                                                                         runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS,
                 config=config(tmp_path, fail={"TWO": 4}), apply=True)
    log = tmp_path / "steps.log"
    run_id = queue_one(rt)
    worker = Worker(rt, "w1")
    for _ in range(3):
        worker.run_one()
        rt.clock.advance(timedelta(hours=1))
    run = show(rt, run_id)
    assert run.status is RunStatus.FAILED and run.error_code == "MODEL_UNAVAILABLE"
    assert "failed on purpose" in (run.error_message or "")
    assert worker.run_one() is None
    actions.retry(rt, run_id)
    assert run_next(worker).status is RunStatus.RETRY_PENDING  # 4th failure
    rt.clock.advance(timedelta(hours=1))
    assert run_next(worker).status is RunStatus.SUCCESS
    assert lines(log, "end")["ONE"] == 1
    assert show(rt, run_id).attempts[3].trigger.value == "manual"


def test_permanent_error_fails_at_once_and_optional_step_gives_partial_success(store_url: str,
                                                                               tmp_path: Path,
                                                                               runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS,
                 config=config(tmp_path, fail={"FOUR": 1}, fail_code="NOTION_UNAUTHORIZED"), apply=True)
    log = tmp_path / "steps.log"
    run_id = queue_one(rt)
    outcome = Worker(rt, "w1").run_one()
    assert outcome is not None and outcome.status is RunStatus.PARTIAL_SUCCESS
    run = show(rt, run_id)
    assert [s.status for s in run.steps] == [StepStatus.SUCCESS] * 3 + [StepStatus.FAILED]
    assert run.steps[3].error_code == "NOTION_UNAUTHORIZED"
    # Retrying runs only the failed step.
    actions.retry(rt, run_id)
    assert run_next(Worker(rt, "w1")).status is RunStatus.SUCCESS
    assert lines(log, "end") == {"ONE": 1, "TWO": 1, "THREE": 1, "FOUR": 1}


def test_retry_from_step_reruns_that_step_and_the_later_ones(store_url: str, tmp_path: Path,
                                                             runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    log = tmp_path / "steps.log"
    run_id = queue_one(rt)
    Worker(rt, "w1").run_one()
    with pytest.raises(errors.InvalidTransition):
        actions.retry(rt, run_id)  # SUCCESS needs --from-step
    with pytest.raises(errors.InvalidInput):
        actions.retry(rt, run_id, from_step="NOPE")
    actions.retry(rt, run_id, from_step="THREE")
    assert run_next(Worker(rt, "w1")).status is RunStatus.SUCCESS
    assert lines(log, "end") == {"ONE": 1, "TWO": 1, "THREE": 2, "FOUR": 2}
    run = show(rt, run_id)
    assert run.attempts[-1].from_step == "THREE" and run.attempts[-1].trigger.value == "manual"


def _start_blocked(rt: Runtime, log: Path, step: str) -> tuple[threading.Thread, dict[str, RunOutcome]]:
    """Run a worker in a thread until it is inside ``step`` (its start line is logged)."""
    worker = Worker(rt, "slow")
    result: dict[str, RunOutcome] = {}

    def run() -> None:
        if (outcome := worker.run_one()) is not None:
            result["outcome"] = outcome

    thread = threading.Thread(target=run)
    thread.start()
    deadline = threading.Event()
    for _ in range(5000):
        if lines(log, "start")[step]:
            break
        deadline.wait(0.01)
    assert lines(log, "start")[step], f"worker never reached {step}"
    return thread, result


def test_worker_that_lost_its_lease_writes_nothing(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS,
                 config=config(tmp_path, block_on=["TWO"]), apply=True)
    log = tmp_path / "steps.log"
    run_id = queue_one(rt)
    thread, result = _start_blocked(rt, log, "TWO")
    rt.clock.advance(timedelta(seconds=61))  # the lease (60s) has expired
    sweep = reconciler.sweep(rt)
    assert sweep.recovered == [run_id]
    assert run_next(Worker(rt, "rescuer")).status is RunStatus.SUCCESS
    (tmp_path / "gate").touch()  # the paused worker wakes up
    thread.join(timeout=60)
    assert result["outcome"].error_code == "LEASE_LOST"
    run = show(rt, run_id)
    assert run.status is RunStatus.SUCCESS
    assert [a.trigger.value for a in run.attempts] == ["scheduled", "recovery"]
    assert [a.outcome.value for a in run.attempts] == ["lost", "success"]
    assert run.attempts[1].from_step == "TWO" and run.attempts[1].worker_id == "rescuer"
    ends = [line.split() for line in log.read_text().splitlines() if line.startswith("end")]
    assert Counter(e[2] for e in ends) == {"ONE": 1, "TWO": 1, "THREE": 1, "FOUR": 1}
    assert all(e[4] == "2" for e in ends if e[2] != "ONE")  # TWO onward were completed by attempt 2


def test_cancel_a_running_run_stops_at_the_next_step_boundary(store_url: str, tmp_path: Path,
                                                              runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS,
                 config=config(tmp_path, block_on=["TWO"]), apply=True)
    log = tmp_path / "steps.log"
    run_id = queue_one(rt)
    thread, result = _start_blocked(rt, log, "TWO")
    assert actions.cancel(rt, run_id).action == "cancel_requested"
    (tmp_path / "gate").touch()
    thread.join(timeout=60)
    run = show(rt, run_id)
    assert run.status is RunStatus.CANCELLED
    assert [s.status for s in run.steps] == [StepStatus.SUCCESS, StepStatus.SUCCESS, StepStatus.PENDING,
                                             StepStatus.PENDING]
    assert lines(log, "start")["THREE"] == 0
    with pytest.raises(errors.InvalidTransition):
        actions.cancel(rt, run_id)


def test_recovery_attempts_count_toward_max_attempts(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    run_id = queue_one(rt)
    now = rt.clock.now()
    for attempt in range(1, 4):
        with rt.store.write() as conn:
            claim = claims.acquire_run(conn, worker_id="dies", now=now, lease_until=now + timedelta(seconds=60),
                                         steps_by_workflow={"four_steps": FOUR_STEPS.step_names()}, projects=None,
                                         backfill_limit=1)
        assert claim is not None and claim.attempt == attempt
        now += timedelta(seconds=61)
        rt.clock.set(now)
        reconciler.sweep(rt)
    run = show(rt, run_id)
    assert run.status is RunStatus.FAILED and run.error_code == "LEASE_EXPIRED"
    assert [a.outcome.value for a in run.attempts] == ["lost"] * 3


def test_restarted_worker_takes_its_own_runs_back_at_once(store_url: str, tmp_path: Path,
                                                          runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    run_id = queue_one(rt)
    now = rt.clock.now()
    with rt.store.write() as conn:
        claims.acquire_run(conn, worker_id="host:1", now=now, lease_until=now + timedelta(seconds=60),
                             steps_by_workflow={"four_steps": FOUR_STEPS.step_names()}, projects=None,
                             backfill_limit=1)
    done = WorkerPool(rt, "host:1", concurrency=1).work(until_idle=True)  # the lease is still live: no waiting for it
    assert [o.status for o in done] == [RunStatus.SUCCESS]
    assert [a.trigger.value for a in show(rt, run_id).attempts] == ["scheduled", "recovery"]


def test_unknown_payload_version_fails_clearly(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    log = tmp_path / "steps.log"
    run_id = queue_one(rt)
    from sqlalchemy import update

    from engine.store.tables import runs

    with rt.store.write() as conn:
        conn.execute(update(runs).where(runs.c.id == run_id).values(pinned={"payload_version": 99}))
    outcome = Worker(rt, "w1").run_one()
    assert outcome is not None and outcome.status is RunStatus.FAILED
    assert outcome.error_code == "PAYLOAD_VERSION_UNSUPPORTED"
    assert "payload version 99" in (show(rt, run_id).error_message or "")
    assert not log.exists()


def test_claim_limits_one_running_per_key_and_backfill_concurrency(store_url: str, tmp_path: Path,
                                                                   runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    rt.clock.set(T0 + timedelta(hours=5, minutes=1))
    from datetime import date

    actions.backfill(rt, "four", first=date(2026, 9, 29), last=date(2026, 9, 29))
    names = {"four_steps": FOUR_STEPS.step_names()}
    now = rt.clock.now()

    def claim(worker: str) -> claims.Claim | None:
        with rt.store.write() as conn:
            return claims.acquire_run(conn, worker_id=worker, now=now, lease_until=now + timedelta(minutes=1),
                                        steps_by_workflow=names, projects=None, backfill_limit=1)

    first = claim("a")
    assert first is not None and first.run.trigger.value == "BACKFILL"
    assert claim("b") is None  # backfill_concurrency = 1
    # Revision 2 of the period whose revision 1 is RUNNING (the first slot of the backfilled date).
    forced = actions.trigger(rt, "four", day=date(2026, 9, 29), force_new=True)
    with rt.store.read() as conn:
        latest = run_rows.get_run(conn, forced.run_id)
    assert latest.revision == 2 and latest.business_key == first.run.business_key
    # MANUAL priority would put it first, but its period is RUNNING; the other backfills wait for the limit.
    assert claim("c") is None
    with rt.store.write() as conn:
        claims.release_run(conn, first.run.id, first.fence, RunStatus.SUCCESS, now)
    after = claim("d")
    assert after is not None and after.run.id == forced.run_id


def test_heartbeat_keeps_a_long_step_leased(sqlite_url: str, tmp_path: Path) -> None:
    """Real time: a 1 s lease renewed every 0.25 s survives a step that outlasts it."""
    from engine.core.clock import SystemClock

    log = tmp_path / "steps.log"
    spec = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC")
    rt = make_runtime(sqlite_url, schedules=[spec], clock=SystemClock(), registry={**load_registry(), **FLOWS},
                      extra={"testflow": {"log": str(log), "gate": str(tmp_path / "gate"), "block_on": ["TWO"]},
                             "worker": {"lease": "1s"}})
    definitions.apply(rt)
    actions.trigger(rt, "four")
    thread, result = _start_blocked(rt, log, "TWO")
    with rt.store.read() as conn:
        (run,) = run_rows.list_runs(conn)
    first_lease = run.lease_until
    assert first_lease is not None

    def renewed_past_first_lease() -> bool:
        with rt.store.read() as conn:
            current = run_rows.get_run(conn, run.id, detail=False)
        return current.lease_until is not None and current.lease_until > first_lease + timedelta(seconds=1)

    waiter = threading.Event()
    for _ in range(1000):  # up to ~10 s for the heartbeat to renew twice past the first lease
        if renewed_past_first_lease():
            break
        waiter.wait(0.01)
    assert renewed_past_first_lease()
    assert rt.clock.now() > first_lease  # the original lease has run out: only the heartbeat keeps it
    assert reconciler.sweep(rt).recovered == []  # a live lease is never taken
    (tmp_path / "gate").touch()
    thread.join(timeout=60)
    assert result["outcome"].status is RunStatus.SUCCESS


def test_a_step_waits_on_the_engines_clock(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS,
                 config=config(tmp_path, wait_on=["TWO"], wait_s=40.0), apply=True)
    run_id = queue_one(rt)
    started = rt.clock.now()
    assert run_next(Worker(rt, "w1")).status is RunStatus.SUCCESS
    assert rt.clock.now() - started == timedelta(seconds=40)  # the manual clock passed the wait: no real sleep
    assert show(rt, run_id).status is RunStatus.SUCCESS


def test_sigterm_during_a_steps_wait_hands_the_run_back_at_that_step(store_url: str, tmp_path: Path,
                                                                     runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS,
                 config=config(tmp_path, wait_on=["TWO"], wait_s=40.0), apply=True)
    log = tmp_path / "steps.log"
    run_id = queue_one(rt)
    stop = threading.Event()
    worker = Worker(rt, "w1", stop=stop)
    claim = worker.claim()
    assert claim is not None
    stop.set()  # SIGTERM while ONE runs: ONE's boundary would hand back; TWO is never reached
    outcome = worker.execute(claim)
    assert outcome.status is RunStatus.QUEUED
    assert lines(log, "start")["TWO"] == 0

    # Started again with SIGTERM arriving inside TWO's wait: the wait ends at once.
    stop.clear()
    worker2 = Worker(rt, "w2", stop=stop)
    claim = worker2.claim()
    assert claim is not None
    before = rt.clock.now()
    stop.set()
    # ONE is done; the run resumes at TWO, whose wait ends at once: no time passes.
    outcome = worker2.execute(claim)
    assert outcome.status is RunStatus.QUEUED and rt.clock.now() == before
    run = show(rt, run_id)
    assert run.status is RunStatus.QUEUED
    assert [a.outcome.value for a in run.attempts][-1] == "released"
    assert lines(log, "start")["TWO"] == 1 and lines(log, "end")["TWO"] == 0
    stop.clear()
    rt.clock.advance(timedelta(seconds=1))
    assert run_next(Worker(rt, "w3")).status is RunStatus.SUCCESS
    assert lines(log, "end")["TWO"] == 1
