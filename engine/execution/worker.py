"""The worker: claim one run, execute its steps through checkpoints, release it with an outcome.

One commit per step boundary: a step's SUCCESS, output, pins and artifacts go
together with the next step's start and the lease extension. Every write is
conditioned on the claim's fencing token, and ``ctx.check_fence()`` re-checks
it right before each external effect, so a worker that lost its lease can
neither complete a step nor a run that another worker now owns.

Stopping (SIGTERM, SIGINT) is bounded: a step still busy ``STOP_GRACE_S`` after the
stop is abandoned like a step past its timeout (its token revoked locally, its daemon
thread left to end on its own) and the run is handed back to resume at that step
(attempt trigger ``handback``), so a stuck generation never holds a shutdown.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from engine.core import clock, errors, logs, policies
from engine.core.clock import Clock, parse_instant
from engine.core.models import AttemptOutcome, AttemptTrigger, NewRun, RunStatus, StepStatus
from engine.execution import fan_out, healer, loop
from engine.execution.group_commit import GroupCommitter, PinnedWriter, Writer
from engine.plugins.contract import StepContext, StepResult, StepSpec, WorkflowDef
from engine.runtime import Runtime
from engine.store import claims, instances, marks, ops_facts, outbox
from engine.store.claims import Claim
from engine.store.handle import Store

log = logging.getLogger(__name__)
#: How long a step may go on after a stop before it is abandoned and its run handed back.
STOP_GRACE_S = 10.0
_POLL_S = 0.25  # how often a worker waiting on its step looks at the stop event


class _StepThread:
    """One daemon thread that runs a worker's steps, in order.

    A daemon, unlike a ``ThreadPoolExecutor``'s threads (joined at interpreter exit): a step
    abandoned at its timeout or at a stop, blocked in a read, never holds the process open.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None  # started by the first step (a worker may run none)

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn`` on this thread after what was submitted before; its future."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="step", daemon=True)
            self._thread.start()
        future: Future[Any] = Future()
        self._queue.put((future, fn))
        return future

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting worker
                future.set_exception(exc)

    def shutdown(self) -> None:
        """Let the thread end once what it runs now (if anything) has returned."""
        self._queue.put(None)


def default_worker_id() -> str:
    """This process's worker id: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class RunOutcome:
    run_id: int
    key: str
    status: RunStatus
    error_code: str | None = None


class _Lease:
    """The claim as this process holds it: the heartbeat and the step thread share it."""

    def __init__(self, rt: Runtime, claim: Claim, lease: timedelta,
                 write: Callable[[], AbstractContextManager[Any]] | None = None) -> None:
        self.rt = rt
        self.write = write or rt.store.write
        self.run_id = claim.run.id
        self.fence = claim.fence
        self.lease = lease
        self.lost = threading.Event()
        self.stop = threading.Event()
        self.max_hold = 2 * timedelta(seconds=claim.run.max_runtime_s)
        self.started = rt.clock.monotonic()

    def check(self) -> None:
        """Raise LeaseLost unless this worker still holds the run under a live lease (read from the database)."""
        if self.lost.is_set():
            raise errors.LeaseLost(self.run_id, self.fence)
        with self.rt.store.read() as conn:
            claims.check_fence(conn, self.run_id, self.fence, self.rt.clock.now())

    def beat(self) -> bool:
        """Extend the lease once; False when this run needs no more beats (ended, lost, 2x max_runtime)."""
        clock = self.rt.clock
        if self.stop.is_set() or self.lost.is_set():
            return False
        if clock.monotonic() - self.started > self.max_hold.total_seconds():
            logs.event(log, logging.WARNING, "heartbeat_stopped", run=self.run_id, reason="max_runtime")
            return False
        try:
            with self.write() as conn:
                claims.hold_run(conn, self.run_id, self.fence, lease_until=clock.now() + self.lease)
        except errors.LeaseLost:
            if not self.stop.is_set():  # not merely the run ending between the check and the write
                logs.event(log, logging.WARNING, "lease_lost", run=self.run_id, token=self.fence)
            self.lost.set()
            return False
        except loop.DATABASE_ERRORS:  # a transient database error: the next beat tries again
            logs.event(log, logging.ERROR, "heartbeat_failed", exc_info=True, run=self.run_id)
        except Exception:  # a bug, not an outage: said once; the lease runs out and the reconciler takes the run
            logs.event(log, logging.ERROR, "heartbeat_crashed", exc_info=True, run=self.run_id)
            return False
        return True


class Worker:
    """Claims and executes runs. ``run_one`` is one claim; ``work`` is the loop."""

    def __init__(self, rt: Runtime, worker_id: str | None = None, *, stop: threading.Event | None = None,
                 writer: Writer | None = None) -> None:
        self.rt = rt
        # This thread's write transactions: its own pinned connection, or a pool's shared group commit.
        self._writer = writer or PinnedWriter(rt.store.engine)
        shared = isinstance(self._writer, GroupCommitter)
        self._beat_write = self._writer.write if shared else rt.store.write  # the heartbeat is another thread
        # Set by SIGTERM: the current step finishes, then the run is handed back (lease released).
        self.stop = stop or threading.Event()
        self.worker_id = worker_id or default_worker_id()
        self.lease = rt.config.worker.lease
        self._executor = _StepThread()
        self.steps_by_workflow = {name: wf.step_names() for name, wf in rt.registry.items()}
        self._deferred: list[tuple[int, str, dict[str, Any]]] = []  # log events, emitted after the commit
        self.projects = self._served_projects()
        self._last_beat: float | None = None
        self._held: _Lease | None = None  # the run being executed, renewed by the heartbeat thread
        self._claimed: int | None = None  # the run claimed, from its claim's commit to its release
        self._degraded = False  # a step of the current attempt succeeded around an outside failure
        self._heartbeat: threading.Thread | None = None
        self._closed = threading.Event()

    def _served_projects(self) -> list[str] | None:
        """Projects whose repositories this node can open (SPEC §13); None means no restriction."""
        if not self.rt.config.schedules:
            return None
        served = []
        for spec in self.rt.config.schedules:
            workflow = self.rt.registry.get(spec.workflow)
            if workflow is not None and workflow.can_serve(self.rt.settings(workflow.name), spec.project):
                served.append(spec.project)
                served += workflow.child_projects(self.rt.settings(workflow.name), spec.project)
        return sorted(set(served))

    def run_one(self) -> RunOutcome | None:
        """Claim the best claimable run and execute it; None when nothing is claimable now."""
        claim = self.claim()
        return None if claim is None else self.execute(claim)

    def claim(self) -> Claim | None:
        """Claim the best claimable run (one commit); from here on ``held_run`` names it until ``execute`` ends."""
        with self._writer.write() as conn:
            # Read once the write lock is ours (SQLite's BEGIN IMMEDIATE): started_at is when the claim
            # was made, not when this thread began to wait for another writer.
            now = self.rt.clock.now()
            claim = claims.acquire_run(
                conn, worker_id=self.worker_id, now=now, lease_until=now + self.lease,
                steps_by_workflow=self.steps_by_workflow, projects=self.projects,
                backfill_limit=self.rt.config.worker.backfill_concurrency)
        if claim is not None:
            self._claimed = claim.run.id
        return claim

    def execute(self, claim: Claim) -> RunOutcome:
        """Execute a run this worker has just claimed, through its checkpoints, and release it."""
        try:
            logs.event(log, logging.INFO, "run_claimed", run=claim.run.id, key=claim.run.idempotency_key,
                       attempt=claim.attempt, token=claim.fence, worker=self.worker_id)
            try:
                outcome = self._execute(claim)
            except errors.LeaseLost:  # a boundary's guard failed (in a group commit: this boundary alone)
                logs.event(log, logging.WARNING, "lease_lost", run=claim.run.id, key=claim.run.idempotency_key,
                           token=claim.fence, effect="boundary not recorded")
                outcome = RunOutcome(claim.run.id, claim.run.idempotency_key, RunStatus.RUNNING,
                                     errors.LeaseLost.code)
        finally:
            self._claimed = None
        return outcome

    def _execute(self, claim: Claim) -> RunOutcome:
        run = claim.run
        workflow = self.rt.workflow(run.workflow)
        lease = _Lease(self.rt, claim, self.lease, self._beat_write)
        payload = run.pinned.get("payload_version")
        if payload != workflow.payload_version or tuple(s.name for s in run.steps) != workflow.step_names():
            error = errors.StepError("PAYLOAD_VERSION_UNSUPPORTED",
                                     f"run {run.id} has payload version {payload} and steps "
                                     f"{[s.name for s in run.steps]}; this worker runs {workflow.name} "
                                     f"v{workflow.payload_version} {list(workflow.step_names())}", retryable=False)
            return self._fail(claim, workflow, lease, None, error)
        if self._heartbeat is None:
            self._heartbeat = threading.Thread(target=self._heartbeats, name="heartbeat", daemon=True)
            self._heartbeat.start()
        self._held = lease
        self._degraded = False
        try:
            return self._steps(claim, workflow, lease)
        finally:
            lease.stop.set()
            self._held = None

    @property
    def held_run(self) -> int | None:
        """The id of the run this worker has claimed and is executing, if any."""
        return self._claimed

    def _heartbeats(self) -> None:
        """This worker's heartbeat thread: every quarter of the lease, extend the run it holds, if any.

        One thread for the worker's life, not one per run: starting a thread costs
        about as much as a step boundary, and a lease is still renewed at least
        every quarter of it while its run is held (the first beat may come sooner).
        """
        finished: _Lease | None = None
        while not self.rt.clock.wait(self.lease.total_seconds() / 4, self._closed):
            lease = self._held
            if lease is not None and lease is not finished and not lease.beat():
                finished = lease

    def _steps(self, claim: Claim, workflow: WorkflowDef, lease: _Lease) -> RunOutcome:
        run = claim.run
        outputs: dict[str, Any] = {s.name: s.output or {} for s in run.steps if s.status is StepStatus.SUCCESS}
        pinned = dict(run.pinned)
        position = claim.start_position
        fixed = self._run_context(claim, workflow, lease)
        while position < len(workflow.steps):
            step = workflow.steps[position]
            ctx = self._context(claim, fixed, pinned, outputs, position)
            logs.event(log, logging.INFO, "step_started", run=run.id, key=run.idempotency_key, step=step.name)
            try:
                result = self._call(step, ctx, lease)
                output = step.commit_output(result)  # validated before anything is committed
                children = fan_out.child_rows(self.rt, run, step.name, ctx.started)  # outside the transaction
            except errors.LeaseLost:
                logs.event(log, logging.WARNING, "lease_lost", run=run.id, key=run.idempotency_key, step=step.name,
                           effect="writing nothing")
                return RunOutcome(run.id, run.idempotency_key, RunStatus.RUNNING, errors.LeaseLost.code)
            except errors.Interrupted:  # SIGTERM during a wait: the step starts again at the next claim
                now = self.rt.clock.now()
                with self._transaction() as conn:
                    claims.hold_run(conn, run.id, claim.fence, lease_until=now + self.lease)
                    return self._hand_back(conn, claim, position, now)
            except errors.StepError as exc:
                exc.retryable = step.is_retryable(exc)
                return self._fail(claim, workflow, lease, position, exc)
            except Exception as exc:  # a bug in a step: retried within the budget, then FAILED
                logs.event(log, logging.ERROR, "step_crashed", exc_info=True, run=run.id, step=step.name)
                error = errors.StepError("STEP_CRASHED", f"{type(exc).__name__}: {exc}", retryable=True)
                return self._fail(claim, workflow, lease, position, error)
            pins = {**result.pins, **({fan_out.FAN_OUT_PIN: step.name} if children else {})}
            new_pins = {k: v for k, v in pins.items() if k not in pinned}
            pinned.update(new_pins)
            outputs[step.name] = output
            outcome = self._checkpoint(claim, workflow, position, result, output, pinned if new_pins else None,
                                       children)
            if outcome is not None:
                return outcome
            position += 1
        return self._finish(claim, RunStatus.SUCCESS, AttemptOutcome.SUCCESS)  # nothing left to run

    def _run_context(self, claim: Claim, workflow: WorkflowDef, lease: _Lease) -> dict[str, Any]:
        """The ``StepContext`` fields that stay the same for every step of this attempt (built once per run)."""
        run = claim.run
        return dict(
            run_id=run.id, workflow=run.workflow, project=run.project, idempotency_key=run.idempotency_key,
            business_key=run.business_key, revision=run.revision, scheduled_for=run.scheduled_for,
            attempt=claim.attempt, settings=self.rt.settings(workflow.name), check_fence=lease.check,
            exclusive=self.rt.store.exclusive, pace=partial(wait_for_slot, self.rt.store, self.rt.clock),
            sleep=partial(self._step_sleep, lease), engine_facts=partial(_engine_facts, self.rt),
            output_models=workflow.output_models(), children=partial(fan_out.outcomes, self.rt, run.id),
            marks=marks.StoreMarks(self.rt.store, self.rt.clock, run.id))

    def _context(self, claim: Claim, fixed: dict[str, Any], pinned: dict[str, Any], outputs: dict[str, Any],
                 position: int) -> StepContext:
        run = claim.run
        period_start = pinned.get("window_start") or run.scheduled_for.isoformat()
        period_end = pinned.get("window_end") or run.scheduled_for.isoformat()
        return StepContext(
            **fixed, period_start_at=parse_instant(period_start), period_end_at=parse_instant(period_end),
            timezone=str(pinned.get("timezone", "UTC")), pinned=dict(pinned), outputs=dict(outputs),
            inputs=dict(pinned.get("inputs") or {}),
            previous_output=run.steps[position].output if position < len(run.steps) else None)

    def _step_sleep(self, lease: _Lease, seconds: float) -> None:
        """``ctx.sleep``: wait on the engine's clock; SIGTERM ends it at once (``Interrupted``), a lost
        lease within a quarter of the lease (``LeaseLost``), so neither waits out a retry budget."""
        left = max(0.0, seconds)
        while True:
            if lease.lost.is_set():
                raise errors.LeaseLost(lease.run_id, lease.fence)
            if self.stop.is_set():
                raise errors.Interrupted(f"run {lease.run_id}: stopping while a step waited")
            if left <= 0:
                return
            part = min(left, self.lease.total_seconds() / 4)
            self.rt.clock.sleep(part, self.stop)
            left -= part

    def _call(self, step: StepSpec, ctx: StepContext, lease: _Lease) -> StepResult:
        timeout_s = step.timeout_s
        if step.inline:  # on this thread: a quick step, no hand-off; the timeout is checked when it returns
            started = self.rt.clock.monotonic()
            result = self._attempts(step, ctx)
            if self.rt.clock.monotonic() - started > timeout_s:
                raise errors.step_error("STEP_TIMEOUT", f"step did not finish within {timeout_s:g}s")
            if not isinstance(result, StepResult):
                raise TypeError(f"step returned {type(result).__name__}, not StepResult")
            return result
        result = self._await(step, self._executor.submit(partial(self._attempts, step, ctx)), lease)
        if not isinstance(result, StepResult):
            raise TypeError(f"step returned {type(result).__name__}, not StepResult")
        return result

    def _await(self, step: StepSpec, future: Future[Any], lease: _Lease) -> Any:
        """The step's result, waited for in real time until its timeout, or ``STOP_GRACE_S`` after a stop.

        Past either, the step is abandoned: a thread cannot be killed, so its token is revoked
        locally (it can make no external effect) and a fresh step thread takes its place. A
        timeout is ``STEP_TIMEOUT``; a stop is ``Interrupted`` (the caller hands the run back).
        """
        started = clock.REAL.monotonic()
        stopped_at: float | None = None
        while True:
            now = clock.REAL.monotonic()
            if stopped_at is None and self.stop.is_set():
                stopped_at = now
            ends = started + step.timeout_s if stopped_at is None else min(started + step.timeout_s,
                                                                           stopped_at + STOP_GRACE_S)
            try:
                return future.result(timeout=max(0.0, min(ends - now, _POLL_S)))
            except FutureTimeout:
                if clock.REAL.monotonic() < ends:
                    continue
            lease.lost.set()
            self._executor.shutdown()
            self._executor = _StepThread()
            if stopped_at is not None and clock.REAL.monotonic() - started < step.timeout_s:
                logs.event(log, logging.WARNING, "step_abandoned", run=lease.run_id, step=step.name,
                           grace_s=STOP_GRACE_S)
                raise errors.Interrupted(f"run {lease.run_id}: {step.name} was still busy {STOP_GRACE_S:g}s "
                                         "after the stop")
            raise errors.step_error("STEP_TIMEOUT", f"step did not finish within {step.timeout_s:g}s")

    def _attempts(self, step: StepSpec, ctx: StepContext) -> StepResult:
        """Execute the step, again within its ``retry_budget_s`` after retryable errors (in the step thread).

        The waits are ``ctx.retry``'s: a lost lease or SIGTERM ends one (``LeaseLost``,
        ``Interrupted``), and a Retry-After longer than what is left goes up as the run's ``not_before``.
        """
        if step.retry_budget_s <= 0:
            return step.run(ctx)
        budget = step.retry_budget_s

        def retryable(exc: BaseException) -> bool:
            return isinstance(exc, errors.StepError) and step.is_retryable(exc)

        def retrying(attempts: int, exc: BaseException, wait_s: float) -> None:
            logs.event(log, logging.INFO, "step_retrying", run=ctx.run_id, step=step.name, in_s=round(wait_s, 2))

        return ctx.retry(partial(step.run, ctx), retryable=retryable, budget=budget, initial_s=min(1.0, budget / 8),
                         max_wait_s=budget / 2, on_retry=retrying)

    def _checkpoint(self, claim: Claim, workflow: WorkflowDef, position: int, result: StepResult,
                    output: dict[str, Any], pinned: dict[str, Any] | None,
                    children: list[NewRun] | None = None) -> RunOutcome | None:
        """Commit a step boundary; returns the run's outcome when the run ends (or waits) here."""
        run = claim.run
        now = self.rt.clock.now()
        last = position == len(workflow.steps) - 1
        with self._transaction() as conn:
            cancel = claims.hold_run(conn, run.id, claim.fence, lease_until=now + self.lease, pinned=pinned)
            claims.record_artifacts(conn, run.id, workflow.steps[position].name, result.artifacts, now)
            self._later(logging.INFO, "step_finished", run=run.id, key=run.idempotency_key,
                        step=workflow.steps[position].name, status=result.status.value)
            if children and not cancel and fan_out.start_children(conn, run, children):
                claims.record_step_end(conn, run.id, position, status=result.status, now=now, output=output)
                return self._wait(conn, claim, len(children), now)
            # A step that succeeded around an outside failure keeps the code it worked around on its row:
            # the run waits for that provider once it ends, and is run again from here (SPEC §15.5).
            degraded = result.degraded
            worked_around: dict[str, Any] = {}
            if degraded is not None:
                self._degraded = True
                worked_around = {"error_code": degraded.code, "error_message": degraded.message}
                self._later(logging.WARNING, "step_degraded", run=run.id, key=run.idempotency_key,
                            step=workflow.steps[position].name, error=degraded.code, message=degraded.message)
            if not (last or result.skip_remaining or cancel or self.stop.is_set()):
                if degraded is None:
                    # The common boundary: this step's end and the next one's start, in one statement.
                    claims.advance_step(conn, run.id, position, status=result.status, output=output, now=now)
                else:
                    claims.record_step_end(conn, run.id, position, status=result.status, now=now, output=output,
                                           **worked_around)
                    claims.start_step(conn, run.id, position + 1, now)
                return None
            claims.record_step_end(conn, run.id, position, status=result.status, now=now, output=output,
                                   **worked_around)
            if result.skip_remaining and not last:
                claims.skip_steps_from(conn, run.id, position + 1, result.skip_remaining, now)
                return self._release(conn, claim, RunStatus.SUCCESS, AttemptOutcome.SUCCESS, now)
            if last:
                return self._release(conn, claim, RunStatus.SUCCESS, AttemptOutcome.SUCCESS, now)
            if cancel:
                return self._release(conn, claim, RunStatus.CANCELLED, AttemptOutcome.CANCELLED, now,
                                     error_code="CANCELLED", error_message="cancelled by an operator")
            return self._hand_back(conn, claim, position + 1, now)

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A write transaction whose log lines are emitted after the commit.

        Nothing is logged while the write lock is held (a blocked stderr must not
        stall the database), and a transaction that rolls back logs nothing.
        """
        self._deferred.clear()
        with self._writer.write() as conn:
            yield conn
        deferred, self._deferred = self._deferred, []
        for level, name, fields in deferred:
            logs.event(log, level, name, **fields)

    def _later(self, level: int, name: str, **fields: Any) -> None:
        self._deferred.append((level, name, fields))

    def _release(self, conn: Any, claim: Claim, status: RunStatus, outcome: AttemptOutcome, now: datetime, *,
                 error_code: str | None = None, error_message: str | None = None,
                 not_before: datetime | None = None, failed_step: str | None = None) -> RunOutcome:
        run = claim.run
        if status is RunStatus.SUCCESS and fan_out.FAN_OUT_PIN in run.pinned:
            # A fan-in that went on although some children did not succeed: the family is partial (SPEC §17).
            missing = fan_out.not_succeeded(conn, run.id)
            if missing:
                status, outcome = RunStatus.PARTIAL_SUCCESS, AttemptOutcome.PARTIAL_SUCCESS
                error_code, error_message = "CHILDREN_FAILED", f"child runs that did not succeed: {missing}"
        trigger = AttemptTrigger.AUTO if status is RunStatus.RETRY_PENDING else None
        claims.release_run(conn, run.id, claim.fence, status, now, not_before=not_before, error_code=error_code,
                             error_message=error_message, next_attempt_trigger=trigger)
        claims.finish_attempt(conn, run.id, claim.attempt, outcome, now, error_code, error_message)
        if status is not RunStatus.RETRY_PENDING:
            promoted = claims.promote_pending(conn, run.schedule_id, now)
            if promoted is not None:
                self._later(logging.INFO, "run_promoted", run=promoted, after=run.id)
            if run.parent_id is not None and fan_out.release_parent(conn, run.parent_id):
                self._later(logging.INFO, "parent_released", run=run.parent_id, last_child=run.id)
        self._later(logging.INFO, "run_finished", run=run.id, key=run.idempotency_key, status=status.value,
                    attempt=claim.attempt, **({"error": error_code} if error_code else {}))
        # What the run waits for now, with its outcome (SPEC §15.5). A first attempt that succeeded without
        # working around anything waits for nothing and never waited: the common case writes nothing here.
        if status in (RunStatus.FAILED, RunStatus.PARTIAL_SUCCESS) or (
                status is RunStatus.SUCCESS and (self._degraded or claim.attempt > 1)):
            healer.record_wait(self.rt, conn, run, status, error_code, failed_step, now)
        event = outbox.FINISHED_WITH_EVENT.get(status)
        if event is not None:  # the alert commits with the outcome (SPEC §15.1); the sender posts it later
            what = "failed" if status is RunStatus.FAILED else "ended PARTIAL_SUCCESS"
            where = f" at {failed_step}" if failed_step else ""
            outbox.record_run_event(conn, run, event, now,
                                    f"run {run.id} {run.idempotency_key} {what}{where}: {error_code or 'ERROR'}",
                                    details={"error_code": error_code, "error": error_message, "step": failed_step})
        elif status is RunStatus.SUCCESS:
            outbox.record_recovered(conn, run, now)
        return RunOutcome(run.id, run.idempotency_key, status, error_code)

    def _wait(self, conn: Any, claim: Claim, children: int, now: datetime) -> RunOutcome:
        """The fan-out's boundary: the run waits for its children, holding no lease (SPEC §17).

        Its last child's finish queues it again; the wait consumes no retry budget.
        """
        run = claim.run
        claims.release_run(conn, run.id, claim.fence, RunStatus.WAITING, now)
        claims.add_attempt_budget(conn, run.id, 1)
        claims.finish_attempt(conn, run.id, claim.attempt, AttemptOutcome.RELEASED, now)
        self._later(logging.INFO, "run_waiting", run=run.id, key=run.idempotency_key, children=children)
        return RunOutcome(run.id, run.idempotency_key, RunStatus.WAITING)

    def _hand_back(self, conn: Any, claim: Claim, next_position: int, now: datetime) -> RunOutcome:
        """Shutdown at a step boundary: the run is QUEUED again and resumes at the next step.

        The interrupted attempt does not consume the run's retry budget.
        """
        run = claim.run
        claims.release_run(conn, run.id, claim.fence, RunStatus.QUEUED, now,
                             next_attempt_trigger=AttemptTrigger.HANDBACK)
        claims.add_attempt_budget(conn, run.id, 1)
        claims.finish_attempt(conn, run.id, claim.attempt, AttemptOutcome.RELEASED, now)
        self._later(logging.INFO, "run_released", run=run.id, key=run.idempotency_key, next_step=next_position)
        return RunOutcome(run.id, run.idempotency_key, RunStatus.QUEUED)

    def _finish(self, claim: Claim, status: RunStatus, outcome: AttemptOutcome) -> RunOutcome:
        now = self.rt.clock.now()
        with self._transaction() as conn:
            claims.hold_run(conn, claim.run.id, claim.fence, lease_until=now + self.lease)
            return self._release(conn, claim, status, outcome, now)

    def _fail(self, claim: Claim, workflow: WorkflowDef, lease: _Lease, position: int | None,
              error: errors.StepError) -> RunOutcome:
        """Record a failure: of the step at ``position``, or of the run as a whole (None)."""
        run = claim.run
        now = self.rt.clock.now()
        used, allowed = policies.retry_budget(attempt=claim.attempt, run_max_attempts=run.max_attempts,
                                              configured=self.rt.config.worker.max_attempts)
        retry_after = timedelta(seconds=error.retry_after_s) if error.retry_after_s else None
        decision = policies.decide_retry(attempts_used=used, max_attempts=allowed,
                                         backoff=self.rt.config.worker.retry_backoff, now=now,
                                         retryable=error.retryable, retry_after=retry_after)
        step = workflow.steps[position] if position is not None else None
        with self._transaction() as conn:
            claims.hold_run(conn, run.id, claim.fence, lease_until=now + self.lease)
            if position is not None:
                claims.record_step_end(conn, run.id, position, status=StepStatus.FAILED, now=now,
                                         error_code=error.code, error_message=error.message)
            self._later(logging.WARNING, "step_failed", run=run.id, key=run.idempotency_key,
                        step=step.name if step else None, error=error.code, retryable=error.retryable,
                        message=error.message)
            if decision.retry:
                return self._release(conn, claim, RunStatus.RETRY_PENDING, AttemptOutcome.RETRY, now,
                                     error_code=error.code, error_message=error.message,
                                     not_before=decision.not_before)
            # Steps run in order, so every step before an optional one that fails has succeeded.
            partial = step is not None and step.optional and bool(position)
            status = RunStatus.PARTIAL_SUCCESS if partial else RunStatus.FAILED
            outcome = AttemptOutcome.PARTIAL_SUCCESS if partial else AttemptOutcome.FAILED
            return self._release(conn, claim, status, outcome, now, error_code=error.code,
                                 error_message=error.message, failed_step=step.name if step else None)

    def work(self, *, until_idle: bool = False, max_runs: int | None = None,
             stop: threading.Event | None = None) -> list[RunOutcome]:
        """Claim and execute runs until stopped, idle (``until_idle``) or ``max_runs`` are done.

        First takes back the runs this worker id still holds (a restarted worker
        resumes its own interrupted runs at once, without waiting for the lease).
        """
        from engine.execution import reconciler

        def reclaim() -> list[int]:
            return reconciler.reclaim_own(self.rt, self.worker_id)

        reclaim()
        runs = loop.RunLoop(self.rt.clock, self.rt.config.worker.poll_interval, stops=[stop or self.stop],
                            claim_and_execute=self.run_one, reclaim=reclaim, beat=self.beat)
        return runs.run(until_idle=until_idle, budget=loop.Budget(max_runs))

    def beat(self, *, every_s: float = 10.0,
             write: Callable[[], AbstractContextManager[Any]] | None = None) -> None:
        """Say this worker is alive and which projects it serves (at most every ``every_s``).

        ``write``: the transaction to use when the caller is not the thread that owns this
        worker's writer (``serve`` beats while the pool's threads work).
        """
        clock = self.rt.clock
        if self._last_beat is not None and clock.monotonic() - self._last_beat < every_s:
            return
        self._last_beat = clock.monotonic()
        with (write or self._writer.write)() as conn:
            instances.beat(conn, instance_id=self.worker_id, role="worker", host=socket.gethostname(),
                               pid=os.getpid(), projects=self.projects, now=clock.now())

    def close(self) -> None:
        """Stop the heartbeat thread and the step thread, and let go of the connection."""
        self._closed.set()
        self._executor.shutdown()
        if not isinstance(self._writer, GroupCommitter):  # a shared one is the pool's to close
            self._writer.close()


def _engine_facts(rt: Runtime, start: datetime, end: datetime) -> dict[str, Any]:
    """``StepContext.engine_facts``: one read transaction, as of the runtime's clock."""
    with rt.store.read() as conn:
        return ops_facts.read(conn, start, end, rt.clock.now(), rt.config.notify.stuck_after,
                              {name: wf.period for name, wf in rt.registry.items()}, rt.config.maintenance)


def wait_for_slot(store: Store, clock: Clock, name: str, interval: timedelta) -> None:
    """Reserve a slot of limit ``name`` (one write transaction) and sleep until it.

    Slots of one limit are at least ``interval`` apart across every process
    sharing ``store``; the sleep happens after the commit, holding nothing.
    """
    slot_at = store.reserve_rate_slot(name, interval, clock.now())
    wait_s = (slot_at - clock.now()).total_seconds()
    if wait_s > 0:
        clock.sleep(wait_s)
