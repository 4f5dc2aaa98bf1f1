"""The worker: claim one run, execute its steps through checkpoints, end it with an outcome.

The state machine of one run: claim, step after step, each boundary one commit, then
its end (``store.finish.finish_run``). A step's SUCCESS, output, pins and artifacts go
together with the next step's start and the lease extension. Every write is
conditioned on the claim's fencing token, and ``ctx.check_fence()`` re-checks
it right before each external effect, so a worker that lost its lease can
neither complete a step nor a run that another worker now owns. The lease and its
heartbeat are ``execution.lease``'s; calling a step (thread, deadline, retries)
``execution.step_call``'s; the loops that call ``run_one`` the pool's (``execution.pool``).

Stopping (SIGTERM, SIGINT) is bounded: a step still busy ``step_call.STOP_GRACE_S`` after the
stop is abandoned like a step past its timeout and the run is handed back to resume at that
step (attempt trigger ``handback``), so a stuck generation never holds a shutdown.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Connection

from engine.core import errors, logs, policies
from engine.core.audit import SYSTEM_RECONCILER
from engine.core.models import FAILURE_STATUSES, AttemptOutcome, AttemptTrigger, NewRun, Run, RunStatus, StepStatus
from engine.core.run_end import RunEnd, RunOutcome
from engine.core.schedule_spec import Schedule
from engine.execution import fan_out, healer, step_call
from engine.execution.group_commit import GroupCommitter, PinnedWriter, Writer
from engine.execution.lease import Heartbeat, Lease
from engine.plugins.contract import StepResult, WorkflowDef
from engine.runtime import Runtime
from engine.store import claims, finish, instances, schedule_rows, start_by
from engine.store.claims import Claim

log = logging.getLogger(__name__)
#: How long a worker keeps the schedules whose start_by it applies at claim before reading them again.
TIMED_REFRESH = timedelta(seconds=30)


def default_worker_id() -> str:
    """This process's worker id: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Worker:
    """Claims and executes runs, one at a time: ``run_one`` is one claim (the pool's loops call it)."""

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
        self._steps_called = step_call.StepCaller(rt.clock, self.stop)
        self.steps_by_workflow = {name: wf.step_names() for name, wf in rt.registry.items()}
        self._deferred: list[tuple[int, str, dict[str, Any]]] = []  # log events, emitted after the commit
        self.projects = self._served_projects()
        self._last_beat: float | None = None
        self._heartbeat = Heartbeat(rt.clock, self.lease)  # renews the lease of the run being executed
        self._claimed: int | None = None  # the run claimed, from its claim's commit to its release
        self._degraded = False  # a step of the current attempt succeeded around an outside failure
        self._timed: dict[int, Schedule] = {}  # the schedules with a start_by, by id (``_timed_schedules``)
        self._timed_at: datetime | None = None

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
                backfill_limit=self.rt.config.worker.backfill_concurrency, caps=self.rt.config.limits.caps(),
                skip=self._past_start_by(self._timed_schedules(conn, now), now))
        if claim is not None:
            self._claimed = claim.run.id
        return claim

    @staticmethod
    def _past_start_by(timed: dict[int, Schedule], now: datetime) -> Callable[[Connection, Run], bool]:
        """The claim's ``skip``: a scheduled run past its ``start_by`` is recorded MISSED, not claimed."""
        return lambda conn, run: start_by.miss_if_late(conn, timed, run, now, actor=SYSTEM_RECONCILER)

    def _timed_schedules(self, conn: Connection, now: datetime) -> dict[int, Schedule]:
        """The schedules with a ``start_by``, read again at most every ``TIMED_REFRESH``: a claim applies it
        (a run past it is MISSED, not run), in every loop, not only the reconciler's."""
        if self._timed_at is None or not timedelta(0) <= now - self._timed_at < TIMED_REFRESH:
            self._timed = {s.id: s for s in schedule_rows.list_schedules(conn) if s.spec.start_by is not None}
            self._timed_at = now
        return self._timed

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
        lease = Lease(self.rt, claim, self.lease, self._beat_write)
        payload = run.pinned.get("payload_version")
        if payload != workflow.payload_version or tuple(s.name for s in run.steps) != workflow.step_names():
            error = errors.StepError("PAYLOAD_VERSION_UNSUPPORTED",
                                     f"run {run.id} has payload version {payload} and steps "
                                     f"{[s.name for s in run.steps]}; this worker runs {workflow.name} "
                                     f"v{workflow.payload_version} {list(workflow.step_names())}", retryable=False)
            return self._fail(claim, workflow, lease, None, error)
        self._heartbeat.hold(lease)
        self._degraded = False
        try:
            return self._steps(claim, workflow, lease)
        finally:
            self._heartbeat.drop()

    @property
    def held_run(self) -> int | None:
        """The id of the run this worker has claimed and is executing, if any."""
        return self._claimed

    def _steps(self, claim: Claim, workflow: WorkflowDef, lease: Lease) -> RunOutcome:
        run = claim.run
        outputs: dict[str, Any] = {s.name: s.output or {} for s in run.steps if s.status is StepStatus.SUCCESS}
        pinned = dict(run.pinned)
        position = claim.start_position
        fixed = step_call.run_context(self.rt, claim, workflow, lease, self.stop)
        while position < len(workflow.steps):
            step = workflow.steps[position]
            ctx = step_call.step_context(claim, fixed, pinned, outputs, position)
            logs.event(log, logging.INFO, "step_started", run=run.id, key=run.idempotency_key, step=step.name)
            try:
                result = self._steps_called.call(step, ctx, lease)
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
        """The run ends here (``finish.finish_run``), with what only the worker knows: how its children
        ended, and what provider it waits for now."""
        run = claim.run
        if status is RunStatus.SUCCESS and fan_out.FAN_OUT_PIN in run.pinned:
            # A fan-in that went on although some children did not succeed: the family is partial (SPEC §17).
            missing = fan_out.not_succeeded(conn, run.id)
            if missing:
                status, outcome = RunStatus.PARTIAL_SUCCESS, AttemptOutcome.PARTIAL_SUCCESS
                error_code, error_message = "CHILDREN_FAILED", f"child runs that did not succeed: {missing}"
        trigger = AttemptTrigger.AUTO if status is RunStatus.RETRY_PENDING else None
        self._end(conn, claim, RunEnd(status, outcome, error_code=error_code, error_message=error_message,
                                      not_before=not_before, next_trigger=trigger, failed_step=failed_step), now)
        self._later(logging.INFO, "run_finished", run=run.id, key=run.idempotency_key, status=status.value,
                    attempt=claim.attempt, **({"error": error_code} if error_code else {}))
        # What the run waits for now, with its outcome (SPEC §15.5). A first attempt that succeeded without
        # working around anything waits for nothing and never waited: the common case writes nothing here.
        if status in FAILURE_STATUSES or (
                status is RunStatus.SUCCESS and (self._degraded or claim.attempt > 1)):
            healer.record_wait(self.rt, conn, run, status, error_code, failed_step, now)
        return RunOutcome(run.id, run.idempotency_key, status, error_code)

    def _wait(self, conn: Any, claim: Claim, children: int, now: datetime) -> RunOutcome:
        """The fan-out's boundary: the run waits for its children, holding no lease (SPEC §17).

        Its last child's finish queues it again; the wait consumes no retry budget.
        """
        run = claim.run
        self._end(conn, claim, RunEnd(RunStatus.WAITING, AttemptOutcome.RELEASED), now)
        self._later(logging.INFO, "run_waiting", run=run.id, key=run.idempotency_key, children=children)
        return RunOutcome(run.id, run.idempotency_key, RunStatus.WAITING)

    def _hand_back(self, conn: Any, claim: Claim, next_position: int, now: datetime) -> RunOutcome:
        """Shutdown at a step boundary: the run is QUEUED again and resumes at the next step.

        The interrupted attempt does not consume the run's retry budget.
        """
        run = claim.run
        self._end(conn, claim, RunEnd(RunStatus.QUEUED, AttemptOutcome.RELEASED,
                                      next_trigger=AttemptTrigger.HANDBACK), now)
        self._later(logging.INFO, "run_released", run=run.id, key=run.idempotency_key, next_step=next_position)
        return RunOutcome(run.id, run.idempotency_key, RunStatus.QUEUED)

    def _end(self, conn: Any, claim: Claim, end: RunEnd, now: datetime) -> None:
        """``finish.finish_run`` under this worker's claim; what it set off is logged after the commit."""
        run = claim.run
        finished = finish.finish_run(conn, run, end, now, holder=finish.Holder(claim.fence, claim.attempt))
        if finished.promoted is not None:
            self._later(logging.INFO, "run_promoted", run=finished.promoted, after=run.id)
        if finished.parent_released:
            self._later(logging.INFO, "parent_released", run=run.parent_id, last_child=run.id)

    def _finish(self, claim: Claim, status: RunStatus, outcome: AttemptOutcome) -> RunOutcome:
        now = self.rt.clock.now()
        with self._transaction() as conn:
            claims.hold_run(conn, claim.run.id, claim.fence, lease_until=now + self.lease)
            return self._release(conn, claim, status, outcome, now)

    def _fail(self, claim: Claim, workflow: WorkflowDef, lease: Lease, position: int | None,
              error: errors.StepError) -> RunOutcome:
        """Record a failure: of the step at ``position``, or of the run as a whole (None)."""
        run = claim.run
        now = self.rt.clock.now()
        used, allowed = policies.retry_budget(attempt=claim.attempt, run_max_attempts=run.max_attempts,
                                              configured=self.rt.config.worker.max_attempts)
        retry_after = timedelta(seconds=error.retry_after_s) if error.retry_after_s else None
        decision = policies.decide_run_retry(attempts_used=used, max_attempts=allowed,
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
        self._heartbeat.close()
        self._steps_called.close()
        if not isinstance(self._writer, GroupCommitter):  # a shared one is the pool's to close
            self._writer.close()

