"""Calling one step: its context, the thread it runs on, its deadline, its retries, its result.

A step runs on the worker's step thread (``StepThread``), or inline when it says it is
quick. It is waited for in real time until its timeout, or ``STOP_GRACE_S`` after a stop
(SIGTERM, SIGINT); past either it is abandoned: a thread cannot be killed, so its token is
revoked locally (it can make no external effect) and a fresh thread takes its place. A
timeout is ``STEP_TIMEOUT``; a stop is ``Interrupted`` (the worker hands the run back).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from engine.core import clock, errors, inputs, logs
from engine.core.clock import Clock
from engine.execution import fan_out, period_walk
from engine.execution.lease import Lease
from engine.plugins.contract import StepContext, StepResult, StepSpec, WorkflowDef
from engine.runtime import Runtime
from engine.store import delivery_rows, marks, ops_facts
from engine.store.claims import Claim
from engine.store.handle import Store

log = logging.getLogger(__name__)
#: How long a step may go on after a stop before it is abandoned and its run handed back.
STOP_GRACE_S = 10.0
_POLL_S = 0.25  # how often a worker waiting on its step looks at the stop event


class StepThread:
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


class StepCaller:
    """Calls a worker's steps, one at a time, on its step thread; ``stop`` is the worker's SIGTERM event."""

    def __init__(self, clock: Clock, stop: threading.Event) -> None:
        self.clock = clock
        self.stop = stop
        self._thread = StepThread()

    def call(self, step: StepSpec, ctx: StepContext, lease: Lease) -> StepResult:
        """The step's result; ``STEP_TIMEOUT`` past its timeout, ``Interrupted`` past the grace after a stop."""
        timeout_s = step.timeout_s
        if step.inline:  # on this thread: a quick step, no hand-off; the timeout is checked when it returns
            started = self.clock.monotonic()
            result = _attempts(step, ctx)
            if self.clock.monotonic() - started > timeout_s:
                raise errors.step_error("STEP_TIMEOUT", f"step did not finish within {timeout_s:g}s")
        else:
            result = self._await(step, self._thread.submit(partial(_attempts, step, ctx)), lease)
        if not isinstance(result, StepResult):
            raise TypeError(f"step returned {type(result).__name__}, not StepResult")
        return result

    def _await(self, step: StepSpec, future: Future[Any], lease: Lease) -> Any:
        """The step's result, waited for in real time until its timeout, or ``STOP_GRACE_S`` after a stop."""
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
            self._thread.shutdown()
            self._thread = StepThread()
            if stopped_at is not None and clock.REAL.monotonic() - started < step.timeout_s:
                logs.event(log, logging.WARNING, "step_abandoned", run=lease.run_id, step=step.name,
                           grace_s=STOP_GRACE_S)
                raise errors.Interrupted(f"run {lease.run_id}: {step.name} was still busy {STOP_GRACE_S:g}s "
                                         "after the stop")
            raise errors.step_error("STEP_TIMEOUT", f"step did not finish within {step.timeout_s:g}s")

    def close(self) -> None:
        """Let the step thread end once its step (if any) has returned."""
        self._thread.shutdown()


def _attempts(step: StepSpec, ctx: StepContext) -> StepResult:
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


def run_context(rt: Runtime, claim: Claim, workflow: WorkflowDef, lease: Lease,
                stop: threading.Event) -> dict[str, Any]:
    """The ``StepContext`` fields that stay the same for every step of this attempt (built once per run)."""
    run = claim.run
    return dict(
        run_id=run.id, workflow=run.workflow, project=run.project, idempotency_key=run.idempotency_key,
        business_key=run.business_key, revision=run.revision, scheduled_for=run.scheduled_for,
        attempt=claim.attempt, settings=rt.settings(workflow.name), check_fence=lease.check,
        exclusive=rt.store.exclusive, slots=rt.store.slot, pace=partial(wait_for_slot, rt.store, rt.clock),
        sleep=partial(lease.sleep, stop=stop), engine_facts=partial(_engine_facts, rt),
        output_models=workflow.output_models(), children=partial(fan_out.outcomes, rt, run.id),
        marks=marks.StoreMarks(rt.store, rt.clock, run.id), earlier_periods=partial(period_walk.earlier_periods, rt),
        deliveries=delivery_rows.StoreDeliveries(rt.store, rt.clock, run.id))


def step_context(claim: Claim, fixed: dict[str, Any], pinned: dict[str, Any], outputs: dict[str, Any],
                 position: int) -> StepContext:
    """The context of the step at ``position``: ``fixed`` (``run_context``), the pins and outputs so far."""
    run = claim.run
    period_start = pinned.get("window_start") or run.scheduled_for.isoformat()
    period_end = pinned.get("window_end") or run.scheduled_for.isoformat()
    return StepContext(
        **fixed, period_start_at=inputs.instant(period_start), period_end_at=inputs.instant(period_end),
        timezone=str(pinned.get("timezone", "UTC")), pinned=dict(pinned), outputs=dict(outputs),
        inputs=dict(pinned.get("inputs") or {}),
        previous_output=run.steps[position].output if position < len(run.steps) else None)


def _engine_facts(rt: Runtime, start: datetime, end: datetime) -> dict[str, Any]:
    """``StepContext.engine_facts``: one read transaction, as of the runtime's clock."""
    with rt.store.read() as conn:
        return ops_facts.read(conn, start, end, rt.clock.now(), rt.config.notify.stuck_after,
                              {name: wf.period for name, wf in rt.registry.items()}, rt.config.maintenance,
                              rt.config.limits.caps())


def wait_for_slot(store: Store, clock: Clock, name: str, interval: timedelta) -> None:
    """``StepContext.pace``: reserve a slot of limit ``name`` (one write transaction) and sleep until it.

    Slots of one limit are at least ``interval`` apart across every process
    sharing ``store``; the sleep happens after the commit, holding nothing.
    """
    slot_at = store.reserve_rate_slot(name, interval, clock.now())
    wait_s = (slot_at - clock.now()).total_seconds()
    if wait_s > 0:
        clock.sleep(wait_s)
