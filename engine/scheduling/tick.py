"""The scheduler tick: load due schedules, decide, persist. It never runs workflow work.

Exactly-once does not rest on reading before inserting: ``next_run_at``
advances by compare-and-set in the same transaction as the inserts, and the
inserts do nothing on conflict with the unique slot index or idempotency key.
Any number of ``tick`` processes can share one database.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from engine.core import alerts, calendars, dependencies, errors, logs, policies, reports
from engine.core.audit import SYSTEM_SCHEDULER
from engine.core.clock import format_instant
from engine.core.models import NewRun, PeriodKind, RunStatus, RunTrigger
from engine.core.schedule_spec import Schedule, ScheduleSpec
from engine.runtime import Runtime
from engine.scheduling import new_runs
from engine.store import audit_rows, due, locks, outbox, run_rows, schedule_rows, upstream_rows

log = logging.getLogger(__name__)


TickReport = reports.TickReport

BATCH = 200  # schedules per transaction: one commit per batch, not per schedule
FIRST_BATCH = 8  # ... but the first batches are small and double: the first runs are claimable sooner


def batch_sizes(first: int = FIRST_BATCH, largest: int = BATCH) -> Iterator[int]:
    """8, 16, 32, 64, 128, 200, 200, ...: a burst's first runs commit after a few schedules, a large
    tick still commits once per ``largest`` schedules."""
    size = first
    while True:
        yield size
        size = min(size * 2, largest)


@dataclass
class _Prepared:
    schedule: Schedule
    plan: policies.TickPlan
    candidates: list[tuple[policies.PlannedSlot, NewRun]]


def tick(rt: Runtime, *, committed: Callable[[], None] | None = None) -> TickReport:
    """One scheduler pass at ``rt.clock.now()``.

    Due schedules are planned (pure), then persisted in batches (``batch_sizes``):
    in one transaction, each schedule's ``next_run_at`` advances by compare-and-set
    together with its inserts. A schedule whose ``next_run_at`` another
    scheduler already advanced is left alone (``lost_races``); a slot whose
    period already has a row counts as handled (``already_present``). Neither
    is an error. ``committed`` is called after each batch that created runs
    (``serve`` wakes its idle worker threads: those runs are claimable now).
    """
    now = rt.clock.now()
    report = TickReport(now=now)
    with rt.store.read() as conn:
        due_schedules = schedule_rows.list_due(conn, now)
        upstreams = _upstreams(rt, conn) if any(s.spec.after for s in due_schedules) else {}
    report.due = len(due_schedules)
    start = 0
    for size in batch_sizes():
        if start >= len(due_schedules):
            break
        # Planned batch by batch, so the first batch does not wait for the whole tick's planning.
        batch = [p for p in (_prepare(rt, schedule, now, upstreams) for schedule in due_schedules[start:start + size]) if p is not None]
        start += size
        if not batch:
            continue
        before = report.runs_created
        with rt.store.write() as conn:
            made = _persist(conn, batch, now, report)
        if committed is not None and report.runs_created > before:
            committed()
        for p, rows, inserted, created in made:
            _announce(rt, p.schedule.spec.name, rows, inserted, created)
    with rt.store.read() as conn:
        report.next_due_at = due.next_wake(conn)
    return report


def _upstreams(rt: Runtime, conn: Connection) -> dict[str, tuple[ScheduleSpec, PeriodKind]]:
    """Every live schedule's definition and its workflow's period kind, by name: what dependent runs wait for."""
    found = {}
    for schedule in schedule_rows.list_schedules(conn):
        try:
            found[schedule.name] = (schedule.spec, rt.workflow(schedule.spec.workflow).period)
        except errors.ReportflowError:  # a workflow no longer installed: nothing of it will succeed
            continue
    return found


def _waits(new: NewRun, spec: ScheduleSpec, upstreams: dict[str, tuple[ScheduleSpec, PeriodKind]]) -> NewRun:
    """A dependent run (SPEC §18) with the upstream periods it waits for and its window's end."""
    if not spec.after or new.status not in (RunStatus.QUEUED, RunStatus.PENDING):
        return new
    pairs = tuple((name, key) for name in spec.after if name in upstreams
                  for key in dependencies.upstream_periods(new.business_key, *upstreams[name]))
    return dataclasses.replace(new, upstream=pairs, upstream_until=new.scheduled_for + spec.after_window)


def _prepare(rt: Runtime, schedule: Schedule, now: datetime,
             upstreams: dict[str, tuple[ScheduleSpec, PeriodKind]]) -> _Prepared | None:
    """The schedule's plan and the rows it would create (no I/O)."""
    spec = schedule.spec
    try:
        workflow = rt.workflow(spec.workflow)
        pins = workflow.pin(rt.settings(workflow.name), spec.project)
    except errors.ReportflowError as exc:
        logs.event(log, logging.ERROR, "schedule_skipped", schedule=spec.name, reason=exc.message)
        return None
    plan = policies.plan_tick(schedule, now)
    if plan is None:
        return None
    plan = _excuse(plan, schedule, rt.config.maintenance)
    candidates = [(slot, _waits(new_runs.new_run(schedule, workflow, slot.slot_at, trigger=RunTrigger.SCHEDULED,
                                                status=slot.status, now=now, max_attempts=rt.config.worker.max_attempts,
                                                workflow_pins=pins, reason=slot.reason, not_before=slot.not_before),
                                spec, upstreams))
                  for slot in plan.slots]
    return _Prepared(schedule, plan, candidates)


def _excuse(plan: policies.TickPlan, schedule: Schedule,
            maintenance: tuple[calendars.MaintenanceWindow, ...]) -> policies.TickPlan:
    """Slots on a holiday or inside a maintenance window are recorded SKIPPED with that reason, whatever
    the misfire policy said: not run, and not an alert."""
    spec = schedule.spec
    windows = calendars.windows_of(schedule, maintenance)
    if not windows and spec.calendar is None and not spec.holidays:
        return plan
    slots = []
    for slot in plan.slots:
        reason = calendars.excuse(spec, windows, slot.slot_at)
        slots.append(slot if reason is None else policies.PlannedSlot(slot.slot_at, RunStatus.SKIPPED, reason))
    return dataclasses.replace(plan, slots=tuple(slots))


def _persist(conn: Connection, batch: list[_Prepared], now: datetime,
             report: TickReport) -> list[tuple[_Prepared, list[NewRun], dict[str, int], Counter[str]]]:
    """Advance each schedule's ``next_run_at`` (compare-and-set) and insert the runs of those that won.

    One statement per schedule (the compare-and-set), then one each for the whole batch: the
    periods already present, the overlap counts, the inserts, the audit records. Returns what
    each winning schedule inserted; a schedule another scheduler won is left out.
    """
    won = []
    for prepared in batch:
        schedule, plan = prepared.schedule, prepared.plan
        if not schedule_rows.advance_next_run_at(conn, schedule.id, plan.expected_next_run_at, plan.next_run_at):
            report.lost_races += 1
            continue
        locks.lock_schedule_runs(conn, schedule.id)
        won.append(prepared)
    if not won:
        return []
    # Periods that already have a row (a trigger, a backfill) count as handled. This read only
    # keeps overlap counting exact; exactly-once rests on ON CONFLICT DO NOTHING below. Two live
    # schedules never share a workflow and project (a unique index), so never a period either.
    present = run_rows.existing_keys(conn, [new.base_key for p in won for _, new in p.candidates])
    counts = run_rows.overlap_counts_of(conn, [p.schedule.id for p in won])
    planned: list[tuple[_Prepared, list[NewRun]]] = []
    for prepared in won:
        state = policies.OverlapState(*counts.get(prepared.schedule.id, (0, 0)))
        to_insert = []
        for slot, new in prepared.candidates:
            if new.base_key in present:
                report.already_present += 1
                continue
            status, overlap_reason = policies.decide_overlap(slot.status, prepared.schedule.spec.overlap, state)
            if status is RunStatus.QUEUED and new.upstream_until is not None:
                status = RunStatus.WAITING  # until its upstream periods are SUCCESS (released below or later)
            reason = overlap_reason or slot.reason
            if status is not new.status or reason is not new.reason:  # a copy only when overlap changed it
                new = dataclasses.replace(new, status=status, reason=reason)
            to_insert.append(new)
        planned.append((prepared, to_insert))
    inserted = run_rows.insert_runs(conn, [new for _, to_insert in planned for new in to_insert])
    waiting = [inserted[new.idempotency_key] for _, to_insert in planned for new in to_insert
               if new.status is RunStatus.WAITING and new.idempotency_key in inserted]
    if waiting:  # an upstream that already succeeded releases its dependents at once
        upstream_rows.release_ready(conn, now, run_ids=waiting)
    made = []
    events: list[dict[str, Any]] = []
    for prepared, to_insert in planned:
        mine = {new.idempotency_key: inserted[new.idempotency_key] for new in to_insert
                if new.idempotency_key in inserted}
        report.already_present += len(to_insert) - len(mine)
        created = Counter(new.status.value for new in to_insert if new.idempotency_key in mine)
        report.created.update(created)
        excused = Counter(new.reason.value for new in to_insert
                          if new.idempotency_key in mine and new.reason in calendars.EXCUSED)
        # Excused slots are SKIPPED rows, audited apart from the overlap's skips.
        overlap_counted = created - Counter({RunStatus.SKIPPED.value: sum(excused.values())})
        events += _audit_events(prepared.schedule, prepared.plan, overlap_counted, now)
        events += _excused_events(prepared.schedule, excused, now)
        _record_unrun(conn, prepared, [new for new in to_insert if new.idempotency_key in mine], now)
        if prepared.plan.too_old is not None:
            report.too_old_slots += prepared.plan.too_old.estimated_slots
        report.handled += 1
        made.append((prepared, to_insert, mine, created))
    audit_rows.record_audits(conn, events)
    return made


def _announce(rt: Runtime, name: str, rows: list[NewRun], inserted: dict[str, int],
              created: Counter[str]) -> None:
    """After the commit: log what was created (the alerts were recorded with the runs)."""
    _log_created(name, rows, inserted)


UNRUN_ALERTED = (RunStatus.MISSED, RunStatus.MANUAL_REQUIRED)


def _record_unrun(conn: Connection, prepared: _Prepared, made: list[NewRun], now: datetime) -> None:
    """``slots_not_run`` in the tick's transaction: slots recorded MISSED / MANUAL_REQUIRED, or too old to record.

    Keyed by the first such slot, so a tick replayed over the same slots raises nothing new.
    """
    schedule, plan = prepared.schedule, prepared.plan
    unrun = [new for new in made if new.status in UNRUN_ALERTED]
    if not unrun and plan.too_old is None:
        return
    counts = dict(Counter(new.status.value for new in unrun))
    details: dict[str, Any] = {"counts": counts}
    if plan.too_old is not None:
        details["too_old"] = {"from": format_instant(plan.too_old.start_at), "to": format_instant(plan.too_old.end_at),
                              "estimated_slots": plan.too_old.estimated_slots}
    first = unrun[0].scheduled_for if unrun else plan.too_old.start_at  # type: ignore[union-attr]
    last = unrun[-1].scheduled_for if unrun else first
    c = outbox.consecutive_unsuccessful(conn, schedule.id, last) if unrun else 1
    words = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    if plan.too_old is not None:
        words = ", ".join(filter(None, [words, f"~{plan.too_old.estimated_slots} too old to record"]))
    outbox.record_schedule_event(
        conn, schedule, alerts.AlertEvent.SLOTS_NOT_RUN,
        outbox.period_dedupe_key(alerts.AlertEvent.SLOTS_NOT_RUN, schedule.name, first), now,
        f"{schedule.name}: slots that will not run from {format_instant(first)}: {words}", consecutive=c,
        business_key=unrun[0].business_key if unrun else None, details=details)


def _log_created(name: str, rows: list[NewRun], inserted: dict[str, int]) -> None:
    """One line per created run; a large catch-up gets one summary line instead of thousands."""
    made = [r for r in rows if r.idempotency_key in inserted]
    if len(made) <= 20:
        for r in made:
            logs.event(log, logging.INFO, "run_created", run=inserted[r.idempotency_key],
                       key=r.idempotency_key, status=r.status.value, slot=r.scheduled_for)
    elif made:
        logs.event(log, logging.INFO, "runs_created", schedule=name, count=len(made),
                   first=made[0].idempotency_key, last=made[-1].idempotency_key,
                   statuses=dict(Counter(r.status.value for r in made)))


UNRUN_ACTIONS = {RunStatus.MISSED.value: ("slots_missed", "misfire"),
                 RunStatus.SKIPPED.value: ("slots_overlap_skipped", "overlap"),
                 RunStatus.MANUAL_REQUIRED.value: ("slots_manual_required", "misfire")}


def _excused_events(schedule: Schedule, excused: Counter[str], now: datetime) -> list[dict[str, Any]]:
    """``slots_holiday`` / ``slots_maintenance``: counted records of slots not run on purpose."""
    return [dict(at=now, actor=SYSTEM_SCHEDULER, action=f"slots_{reason}", schedule_id=schedule.id, run_id=None,
                 before=None, version=schedule.version, reason=reason, after={"count": count})
            for reason, count in excused.items()]


def _audit_events(schedule: Schedule, plan: policies.TickPlan, created: Counter[str],
                  now: datetime) -> list[dict[str, Any]]:
    """Counted, append-only records of slots that did not run (metrics read these)."""
    events = []
    if plan.too_old is not None:
        events.append(dict(at=now, actor=SYSTEM_SCHEDULER, action="slots_too_old", schedule_id=schedule.id,
                           run_id=None, before=None, version=schedule.version, reason="too_old",
                           after={"from": format_instant(plan.too_old.start_at),
                                  "to": format_instant(plan.too_old.end_at),
                                  "estimated_slots": plan.too_old.estimated_slots}))
    for status, count in created.items():
        if status in UNRUN_ACTIONS:
            action, reason = UNRUN_ACTIONS[status]
            events.append(dict(at=now, actor=SYSTEM_SCHEDULER, action=action, schedule_id=schedule.id, run_id=None,
                               before=None, version=schedule.version, reason=reason, after={"count": count}))
    return events

