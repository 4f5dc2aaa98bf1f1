"""Operator actions on runs: trigger, backfill, approve, cancel, retry (SPEC §8, §12).

One row per business period: an action on a period that already has a row
acts on that row (re-queue, approve, or nothing) instead of making another,
except ``trigger --force-new``, which makes a new revision.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from sqlalchemy.engine import Connection

from engine.core import bulk, errors, logs, policies, retention, revisions
from engine.core.cron import timetable
from engine.core.models import (
    CANCELLABLE_STATUSES,
    RETRYABLE_STATUSES,
    AttemptOutcome,
    AttemptTrigger,
    PeriodKind,
    Run,
    RunStatus,
    RunTrigger,
)
from engine.core.run_end import RunEnd
from engine.core.schedule_spec import Schedule
from engine.operations import family_actions
from engine.runtime import Runtime
from engine.scheduling import new_runs
from engine.store import (
    attempt_rows,
    audit_rows,
    delivery_rows,
    finish,
    health_rows,
    pruning,
    run_rows,
    schedule_rows,
)

log = logging.getLogger(__name__)

BACKFILL_BATCH = 200  # backfill periods per transaction: a long range commits as it goes, never in one lock


@dataclass(frozen=True)
class ActionResult:
    action: str  # created | requeued | approved | unchanged | revision | cancel_requested | cancelled
    run_id: int
    status: str
    business_key: str
    message: str


def check_span(first: date, last: date, what: str) -> None:
    """A date range an operator gave for ``what``: in order (``bulk.check_range``) and at most 10 years."""
    bulk.check_range(first, last)
    if (last - first).days > 3660:
        raise errors.InvalidInput(f"a {what} covers at most 10 years at once")


def refuse_disabled(schedule: Schedule, command: str) -> None:
    """``trigger``, ``backfill`` and ``runs retry`` on a disabled schedule exit 3 naming it (SPEC §15.3)."""
    if not schedule.enabled:
        why = f" ({schedule.disabled_reason})" if schedule.disabled_reason else ""
        raise errors.Conflict(f"schedule '{schedule.spec.name}' is disabled{why}: {command} refused; "
                              f"`reportflow schedules enable {schedule.spec.name}` first")


def _slot_for_date(schedule: Schedule, kind: PeriodKind, day: date) -> datetime:
    slot = policies.slot_for_date(schedule.spec, kind, day)
    if slot is None:
        raise errors.InvalidInput(f"schedule '{schedule.spec.name}' ({schedule.spec.cron!r}) has no slot for "
                                  f"business date {day}")
    return slot


def trigger(rt: Runtime, schedule_name: str, *, day: date | None = None, force_new: bool = False) -> ActionResult:
    """A manual run for a business date (default: the latest slot not after now)."""
    now = rt.clock.now()
    with rt.store.write() as conn:
        schedule = schedule_rows.get_schedule(conn, schedule_name)
        refuse_disabled(schedule, "trigger")
        workflow = rt.workflow(schedule.spec.workflow)
        spec = schedule.spec
        if day is None:
            fire = timetable.latest_fire_at_or_before(spec.cron, spec.timezone, now,
                                                 dst_gap=spec.dst_gap, dst_fold=spec.dst_fold)
            if fire is None:
                raise errors.InvalidInput(f"schedule '{schedule_name}' has no slot before now")
            slot = fire.at
        else:
            slot = _slot_for_date(schedule, workflow.period, day)
            if slot > now:
                raise errors.InvalidInput(
                    f"the slot for business date {day} is {slot.isoformat()}, still in the future")
        pins = workflow.pin(rt.settings(workflow.name), spec.project)
        return _trigger_slot(conn, rt, schedule, slot, now, pins, force_new=force_new)


def _trigger_slot(conn: Connection, rt: Runtime, schedule: Schedule, slot: datetime, now: datetime,
                  pins: dict[str, object], *, force_new: bool = False, dry_run: bool = False) -> ActionResult:
    """``trigger`` of one slot's period by the §12 table (``dry_run``: what it would do, nothing written)."""
    spec = schedule.spec
    workflow = rt.workflow(spec.workflow)
    period = policies.business_period(workflow.period, slot, spec.timezone, spec.report_on, spec.sprint)
    existing = run_rows.find_period_runs(conn, workflow.name, spec.project, period.key)
    decision = revisions.decide_period(revisions.Command.TRIGGER, existing, force_new=force_new)
    run = decision.run
    if dry_run:
        verb = {revisions.PeriodAction.CREATE: "created", revisions.PeriodAction.REVISION: "revision",
                revisions.PeriodAction.REQUEUE: "requeued", revisions.PeriodAction.APPROVE: "approved"}
        action = verb.get(decision.action, "unchanged")
        return ActionResult(action, 0 if run is None else run.id, "" if run is None else run.status.value,
                            period.key, f"{period.key}: would be {action}")
    if decision.action is revisions.PeriodAction.CREATE:
        return _create(conn, rt, schedule, slot, RunTrigger.MANUAL, now, pins)
    assert run is not None
    if decision.action is revisions.PeriodAction.REVISION:
        return _create(conn, rt, schedule, slot, RunTrigger.MANUAL, now, pins, revision=run.revision + 1,
                       action="revision")
    if decision.action is revisions.PeriodAction.REQUEUE:
        return _requeue(conn, rt, run, AttemptTrigger.MANUAL, now, "requeued")
    if decision.action is revisions.PeriodAction.APPROVE:
        return _requeue(conn, rt, run, AttemptTrigger.MANUAL, now, "approved")
    hint = (" (use --force-new for a new revision)" if run.status is RunStatus.SUCCESS else
            f" (revision {run.revision} has not started yet: one pending revision per period)" if force_new else "")
    return ActionResult("unchanged", run.id, run.status.value, run.business_key,
                        f"run {run.id} for {run.business_key} is already {run.status.value}{hint}")


def _create(conn: Connection, rt: Runtime, schedule: Schedule, slot: datetime, trigger_type: RunTrigger,
            now: datetime, pins: dict[str, object], *, revision: int = 1, action: str = "created") -> ActionResult:
    workflow = rt.workflow(schedule.spec.workflow)
    new = new_runs.new_run(schedule, workflow, slot, trigger=trigger_type, status=RunStatus.QUEUED, now=now,
                          max_attempts=rt.config.worker.max_attempts, workflow_pins=pins, revision=revision)
    run_id = run_rows.insert_run(conn, new)
    if run_id is None:
        raise errors.Conflict(f"a run for {new.idempotency_key} appeared concurrently; try again")
    audit_rows.record_audit(conn, at=now, actor=rt.actor, action=f"run_{trigger_type.value.lower()}",
                               schedule_id=schedule.id, run_id=run_id, after={"key": new.idempotency_key})
    logs.event(log, logging.INFO, "run_created", run=run_id, key=new.idempotency_key, trigger=trigger_type.value)
    return ActionResult(action, run_id, RunStatus.QUEUED.value, new.business_key,
                        f"run {run_id} queued for {new.idempotency_key}")


def _requeue(conn: Connection, rt: Runtime, run: Run, trigger: AttemptTrigger, now: datetime, action: str,
             *, from_step: str | None = None) -> ActionResult:
    # A parent is its period's run: queued again, it re-runs the children that did not succeed, then its fan-in
    # (on its own, its fan-in would only read them again).
    if from_step is None and family_actions.retry_children(conn, rt, run, now, trigger=trigger, action=action):
        return ActionResult(action, run.id, RunStatus.WAITING.value, run.business_key,
                            f"run {run.id} ({run.idempotency_key}) {action}: its children that did not "
                            "succeed are queued, then its fan-in")
    step_names = rt.workflow(run.workflow).step_names()
    # A recovery attempt no worker took yet is replaced by this one (the operator acted first).
    if attempt_rows.close_pending_attempt(conn, run.id, AttemptOutcome.SUPERSEDED, now,
                                      f"replaced by a {trigger.value} attempt before any worker took it"):
        run = dataclasses.replace(run, attempt_count=run.attempt_count + 1)
    run_rows.requeue(conn, run, trigger=trigger, now=now, from_step=from_step, step_names=step_names,
                     fresh_budget=rt.config.worker.max_attempts)
    # An operator took the run over: should it fail again, its automatic re-queues start afresh (SPEC §15.5).
    health_rows.forget_wait(conn, run.id)
    audit_rows.record_audit(conn, at=now, actor=rt.actor, action=f"run_{action}", schedule_id=run.schedule_id,
                               run_id=run.id, before={"status": run.status.value},
                               after={"status": "QUEUED", "from_step": from_step, "trigger": trigger.value})
    logs.event(log, logging.INFO, f"run_{action}", run=run.id, key=run.idempotency_key, from_step=from_step)
    return ActionResult(action, run.id, RunStatus.QUEUED.value, run.business_key,
                        f"run {run.id} ({run.idempotency_key}) {action}")


# --- backfill ---------------------------------------------------------------

@dataclass
class BackfillReport:
    created: list[str] = field(default_factory=list)
    requeued: list[str] = field(default_factory=list)
    left: list[tuple[str, str]] = field(default_factory=list)  # (key, status) listed, not touched
    present: list[str] = field(default_factory=list)
    future: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)  # periods a prune settled: left out unless include_pruned
    no_slot: list[str] = field(default_factory=list)  # periods the schedule's cron never fires for


def _backfill_slots(schedule: Schedule, kind: PeriodKind, first: date, last: date,
                    no_slot: list[str]) -> Iterator[datetime]:
    """Slots of the business periods in [first, last]; periods the cron has no slot for go to ``no_slot``."""
    spec = schedule.spec
    if kind is PeriodKind.SLOT:
        for fire in timetable.fires_on_local_dates(spec.cron, spec.timezone, first, last,
                                              dst_gap=spec.dst_gap, dst_fold=spec.dst_fold):
            yield fire.at
        return
    seen: set[str] = set()
    day = first
    while day <= last:
        key = policies.period_of_date(kind, day, spec.timezone, spec.sprint).key
        if key not in seen:
            seen.add(key)
            try:
                yield _slot_for_date(schedule, kind, day)
            except errors.InvalidInput:  # e.g. a weekday cron on a daily workflow: Saturday has no run
                no_slot.append(key)
        day += timedelta(days=1)


def backfill(rt: Runtime, schedule_name: str, *, first: date, last: date, dry_run: bool = False,
             progress: Callable[[int, int], None] | None = None, include_pruned: bool = False,
             include_skipped: bool = False) -> BackfillReport:
    """BACKFILL runs for every business period in [first, last] without a row (SPEC §12 table).

    Periods whose slot is still in the future are left out (listed in ``future``), and
    so are periods the cron has no slot for (listed in ``no_slot``).
    Runs once or twice, the outcome is the same: the second pass creates nothing.
    A period without a row inside a range a prune removed is left out (listed in
    ``pruned``) unless ``include_pruned``: pruning never makes a report twice. A slot skipped for a
    holiday, maintenance or a pause stays skipped (listed in ``left``) unless ``include_skipped``.
    """
    check_span(first, last, "backfill")
    now = rt.clock.now()
    report = BackfillReport()
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, schedule_name)
        refuse_disabled(schedule, "backfill")
        pruned_ranges = [] if include_pruned else pruning.pruned_ranges(conn, schedule.id)
    workflow = rt.workflow(schedule.spec.workflow)
    spec = schedule.spec
    pins = workflow.pin(rt.settings(workflow.name), spec.project)
    slots = list(_backfill_slots(schedule, workflow.period, first, last, report.no_slot))
    for index in range(0, len(slots), BACKFILL_BATCH):
        batch = slots[index:index + BACKFILL_BATCH]
        with (rt.store.read() if dry_run else rt.store.write()) as conn:
            for slot in batch:
                period = policies.business_period(workflow.period, slot, spec.timezone, spec.report_on, spec.sprint)
                if slot > now:
                    report.future.append(period.key)
                    continue
                existing = run_rows.find_period_runs(conn, workflow.name, spec.project, period.key)
                if not existing and pruned_ranges and retention.is_pruned(
                        pruned_ranges, *retention.period_dates(period.key, spec.timezone, spec.sprint)):
                    report.pruned.append(period.key)
                    continue
                decision = revisions.decide_period(revisions.Command.BACKFILL, existing,
                                                   include_skipped=include_skipped)
                if decision.action is revisions.PeriodAction.CREATE:
                    if not dry_run:
                        _create(conn, rt, schedule, slot, RunTrigger.BACKFILL, now, pins)
                    report.created.append(period.key)
                elif decision.action is revisions.PeriodAction.REQUEUE:
                    assert decision.run is not None
                    if not dry_run:
                        _requeue(conn, rt, decision.run, AttemptTrigger.BACKFILL, now, "requeued")
                    report.requeued.append(period.key)
                elif decision.action is revisions.PeriodAction.PRESENT:
                    report.present.append(period.key)
                else:
                    assert decision.run is not None
                    report.left.append((period.key, decision.run.status.value))
        if progress is not None:
            progress(min(index + len(batch), len(slots)), len(slots))
    return report


@dataclass
class TriggerRangeReport:
    """``trigger SCHEDULE --from D --to D``: what happened to each period (one ``ActionResult`` each)."""

    results: list[ActionResult] = field(default_factory=list)
    future: list[str] = field(default_factory=list)  # periods whose slot is still ahead: left out
    no_slot: list[str] = field(default_factory=list)  # periods the cron never fires for

    def counts(self) -> dict[str, int]:
        """How many periods each action took (``created``, ``requeued``, ``approved``, ``revision``, ``unchanged``)."""
        out: dict[str, int] = {}
        for result in self.results:
            out[result.action] = out.get(result.action, 0) + 1
        return out


def trigger_range(rt: Runtime, schedule_name: str, *, first: date, last: date, force_new: bool = False,
                  dry_run: bool = False, progress: Callable[[int, int], None] | None = None) -> TriggerRangeReport:
    """``trigger`` for every business period in [first, last]: the §12 table per period, as ``trigger --date`` does.

    A period without a row gets a MANUAL run; MISSED, SKIPPED, CANCELLED, FAILED and
    PARTIAL_SUCCESS ones are re-queued; MANUAL_REQUIRED ones approved; active and
    SUCCESS ones left (``force_new``: a new revision of each). Periods whose slot is
    still in the future are left out. Each action is audited with ``rt.actor``; the
    periods commit in batches, so a long range never holds the write lock at once.
    """
    check_span(first, last, "trigger")
    now = rt.clock.now()
    report = TriggerRangeReport()
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, schedule_name)
        refuse_disabled(schedule, "trigger")
    workflow = rt.workflow(schedule.spec.workflow)
    pins = workflow.pin(rt.settings(workflow.name), schedule.spec.project)
    slots = list(_backfill_slots(schedule, workflow.period, first, last, report.no_slot))
    for index in range(0, len(slots), BACKFILL_BATCH):
        batch = slots[index:index + BACKFILL_BATCH]
        with (rt.store.read() if dry_run else rt.store.write()) as conn:
            for slot in batch:
                if slot > now:
                    report.future.append(policies.business_period(
                        workflow.period, slot, schedule.spec.timezone, schedule.spec.report_on,
                        schedule.spec.sprint).key)
                    continue
                report.results.append(_trigger_slot(conn, rt, schedule, slot, now, pins, force_new=force_new,
                                                    dry_run=dry_run))
        if progress is not None:
            progress(min(index + len(batch), len(slots)), len(slots))
    return report


def trigger_period(rt: Runtime, run_id: int, *, force_new: bool = False) -> ActionResult:
    """``trigger`` of a run's own period ("run now" on the run's page); ``force_new``: a new revision ("regenerate").

    A child run has no schedule: its parent is the period's run. A disabled schedule exits 3.
    """
    now = rt.clock.now()
    with rt.store.write() as conn:
        run = run_rows.get_run(conn, run_id, detail=False)
        if run.schedule_id is None:
            raise errors.InvalidInput(f"run {run_id} is a child run; act on its parent (run {run.parent_id})"
                                      if run.parent_id is not None else f"run {run_id} belongs to no schedule")
        schedule = schedule_rows.get_schedule_by_id(conn, run.schedule_id)
        refuse_disabled(schedule, "trigger")
        workflow = rt.workflow(schedule.spec.workflow)
        pins = workflow.pin(rt.settings(workflow.name), schedule.spec.project)
        return _trigger_slot(conn, rt, schedule, run.scheduled_for, now, pins, force_new=force_new)


# --- single-run actions -----------------------------------------------------

def approve(rt: Runtime, run_id: int) -> ActionResult:
    """Queue a MANUAL_REQUIRED run (``runs approve``); other statuses raise InvalidTransition."""
    now = rt.clock.now()
    with rt.store.write() as conn:
        run = run_rows.get_run(conn, run_id, detail=False)
        if run.status is not RunStatus.MANUAL_REQUIRED:
            raise errors.InvalidTransition(f"run {run_id}", run.status.value, "QUEUED",
                                           "only MANUAL_REQUIRED runs are approved")
        return _requeue(conn, rt, run, AttemptTrigger.MANUAL, now, "approved")


def cancel(rt: Runtime, run_id: int) -> ActionResult:
    """Cancel a run that has not finished; a RUNNING one stops at its next step boundary; children go too."""
    now = rt.clock.now()
    with rt.store.write() as conn:
        run = run_rows.get_run(conn, run_id, detail=False)
        if run.status is RunStatus.RUNNING:  # its worker ends it at its next step boundary
            run_rows.request_cancel(conn, run_id)
            action, status = "cancel_requested", run.status.value
        elif run.status is RunStatus.WAITING or run.status in CANCELLABLE_STATUSES:
            if run.status is RunStatus.WAITING:  # its children first, then the parent (SPEC §17)
                family_actions.cancel_children(conn, rt, run, now)
            finish.finish_run(conn, run, RunEnd(RunStatus.CANCELLED, AttemptOutcome.CANCELLED, reason="cancelled",
                                                note="cancelled by an operator before any worker took it"),
                              now, holder=None)
            action, status = "cancelled", RunStatus.CANCELLED.value
        else:
            raise errors.InvalidTransition(f"run {run_id}", run.status.value, "CANCELLED", "it has already finished")
        audit_rows.record_audit(conn, at=now, actor=rt.actor, action=f"run_{action}", run_id=run_id,
                                   schedule_id=run.schedule_id, before={"status": run.status.value},
                                   after={"status": status})
    return ActionResult(action, run_id, status, run.business_key, f"run {run_id}: {action.replace('_', ' ')}")


def retry(rt: Runtime, run_id: int, *, from_step: str | None = None) -> ActionResult:
    """A new attempt of the same run, from its failed step or from ``from_step`` (SPEC §12)."""
    now = rt.clock.now()
    with rt.store.write() as conn:
        run = run_rows.get_run(conn, run_id, detail=False)
        if run.schedule_id is not None:
            refuse_disabled(schedule_rows.get_schedule_by_id(conn, run.schedule_id), f"retry of run {run_id}")
        workflow = rt.workflow(run.workflow)
        if from_step is not None and from_step not in workflow.step_names():
            raise errors.InvalidInput(f"unknown step '{from_step}' for {run.workflow} "
                                      f"(steps: {', '.join(workflow.step_names())})")
        allowed = RETRYABLE_STATUSES | ({RunStatus.SUCCESS} if from_step else set())
        if run.status not in allowed:
            raise errors.InvalidTransition(f"run {run_id}", run.status.value, "QUEUED",
                                           "retry takes FAILED, PARTIAL_SUCCESS, RETRY_PENDING, CANCELLED, MISSED, "
                                           "SKIPPED (and SUCCESS with --from-step)")
        return _requeue(conn, rt, run, AttemptTrigger.MANUAL, now, "retried", from_step=from_step)


def resend(rt: Runtime, run_id: int, *, targets: Sequence[str] | None = None) -> ActionResult:
    """Send a run's report again where its delivery is unconfirmed or failed (to every such target, or ``targets``):
    in one transaction their ledger rows become PENDING and the run is queued from its workflow's delivery step.

    The one way an unconfirmed delivery is sent again (the engine never does it by itself): an operator who has
    looked at the target and not found the message. ``InvalidInput`` when nothing is left to send.
    """
    now = rt.clock.now()
    with rt.store.write() as conn:
        run = run_rows.get_run(conn, run_id, detail=False)
        if run.schedule_id is not None:
            refuse_disabled(schedule_rows.get_schedule_by_id(conn, run.schedule_id), f"resend of run {run_id}")
        step = rt.workflow(run.workflow).delivery_step
        if step is None:
            raise errors.InvalidInput(f"run {run_id}: {run.workflow} delivers nothing ([[deliveries]])")
        if run.status not in RETRYABLE_STATUSES | {RunStatus.SUCCESS}:
            raise errors.InvalidTransition(f"run {run_id}", run.status.value, "QUEUED",
                                           "resend takes a run that ended (not one queued or running)")
        changed = delivery_rows.resend(conn, policies.base_key(run.workflow, run.project, run.business_key),
                                       targets, now)
        if not changed:
            which = f" to {', '.join(targets)}" if targets else ""
            raise errors.InvalidInput(f"run {run_id}: no delivery of its report{which} is unconfirmed or failed "
                                      f"(reportflow runs show {run_id})")
        audit_rows.record_audit(conn, at=now, actor=rt.actor, action="deliveries_resent", schedule_id=run.schedule_id,
                                run_id=run.id, before={r.target: r.state.value for r in changed},
                                after={r.target: "PENDING" for r in changed})
        return _requeue(conn, rt, run, AttemptTrigger.MANUAL, now, "resent", from_step=step)
