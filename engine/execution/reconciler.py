"""The reconciler: expired leases, orphaned PENDING runs, stalled runs, silent schedules.

Every decision is a conditional update plus an AuditEvent by
SYSTEM_RECONCILER. Stalled runs and silent schedules are reported, not
touched: a run whose lease still lives is never taken from its worker.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from sqlalchemy.engine import Connection

from engine.core import alerts, calendars, errors, logs, policies, reports, stuck
from engine.core.audit import SYSTEM_RECONCILER
from engine.core.clock import format_instant
from engine.core.models import Run, RunStatus
from engine.core.schedule_spec import Criticality
from engine.execution import freshness_alerts, late_alerts
from engine.runtime import Runtime
from engine.store import (
    audit_rows,
    families,
    finish,
    outbox,
    promotion,
    recovery,
    run_rows,
    schedule_rows,
    start_by,
    upstream_rows,
    waiting,
)

log = logging.getLogger(__name__)


SweepReport = reports.SweepReport


def _recover(conn: Connection, run: Run, now: datetime, reason: str, report: SweepReport,
             *, expired_only: bool = True) -> None:
    """Load, decide (``policies.decide_recovery``), persist (``store.recovery``, which ends the run): one transaction."""
    decision = policies.decide_recovery(attempts_used=run.attempt_count, max_attempts=run.max_attempts,
                                        lease_owner=run.lease_owner, reason=reason, now=now)
    recovery.record_recovery(conn, run, decision, now, reason=reason, expired_only=expired_only)
    (report.failed if decision.status is RunStatus.FAILED else report.recovered).append(run.id)
    audit_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="run_recovered", run_id=run.id,
                               schedule_id=run.schedule_id, reason=reason,
                               before={"status": "RUNNING", "lease_owner": run.lease_owner, "token": run.fence},
                               after={"status": decision.status.value})


def _log_recovery(run: Run, report: SweepReport, reason: str) -> None:
    """Logged after the commit: nothing is written to a log while the write lock is held."""
    status = RunStatus.FAILED if run.id in report.failed else RunStatus.RETRY_PENDING
    logs.event(log, logging.WARNING, "run_recovered", run=run.id, key=run.idempotency_key, owner=run.lease_owner,
               status=status.value, reason=reason)


def reclaim_own(rt: Runtime, worker_id: str, *, still_held: Collection[int] = ()) -> list[int]:
    """Runs still RUNNING under ``worker_id`` (a dead predecessor with this id) become recovery attempts now.

    ``still_held``: runs that threads of this very process are executing (a
    worker pool recovering from a database error), which are left alone.
    """
    now = rt.clock.now()
    report = SweepReport()
    with rt.store.read() as conn:
        mine = run_rows.running_runs(conn, owner=worker_id)
    for run in mine:
        if run.id in still_held:
            continue
        try:
            with rt.store.write() as conn:
                _recover(conn, run, now, f"worker {worker_id} restarted", report, expired_only=False)
        except errors.LeaseLost:
            continue
        _log_recovery(run, report, f"worker {worker_id} restarted")
    return report.recovered + report.failed


def _miss_unstarted(rt: Runtime, now: datetime) -> list[int]:
    """Scheduled runs not started by their schedule's ``start_by`` become MISSED (with their alert and audit):
    a report that was due at 09:00 is not run at 15:00 unless an operator asks (``runs retry``)."""
    missed: list[int] = []
    with rt.store.read() as conn:
        timed = [s for s in schedule_rows.list_schedules(conn) if s.spec.start_by is not None]
    for schedule in timed:
        assert schedule.spec.start_by is not None
        with rt.store.write() as conn:
            for run in run_rows.unstarted_past(conn, schedule.id, now - schedule.spec.start_by):
                start_by.miss(conn, schedule, run, now, actor=SYSTEM_RECONCILER)
                missed.append(run.id)
    for run_id in missed:
        logs.event(log, logging.WARNING, "run_missed", run=run_id, reason="start_by")
    return missed


def sweep(rt: Runtime) -> SweepReport:
    """One reconciler pass at ``rt.clock.now()``.

    Each decision commits in its own transaction with its alerts (the outbox); log
    lines follow the commit. The sender (``engine.operations.outbox_sender``) posts the alerts later.
    """
    now = rt.clock.now()
    report = SweepReport()
    with rt.store.read() as conn:
        expired = run_rows.expired_leases(conn, now)
    for run in expired:
        try:
            with rt.store.write() as conn:
                _recover(conn, run, now, "lease expired", report)
        except errors.LeaseLost:  # the worker came back and renewed, or another reconciler won
            continue
        _log_recovery(run, report, "lease expired")
    with rt.store.write() as conn:
        for schedule_id in run_rows.orphaned_pending(conn):
            promoted = promotion.promote_pending(conn, schedule_id, now)
            if promoted is not None:
                report.promoted.append(promoted)
                audit_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="run_promoted",
                                           run_id=promoted, schedule_id=schedule_id, reason="blocker gone",
                                           before={"status": "PENDING"}, after={"status": "QUEUED"})
    for promoted in report.promoted:
        logs.event(log, logging.INFO, "run_promoted", run=promoted, reason="blocker_gone")
    _families(rt, report, now)
    _dependents(rt, report, now)
    report.missed = _miss_unstarted(rt, now)
    report.stalled, report.silent = find_problems(rt, now)
    for run in report.stalled:
        logs.event(log, logging.WARNING, "run_stalled", run=run.id, key=run.idempotency_key,
                   claimed_at=format_instant(run.claimed_at))
    for name, next_run_at in report.silent:
        logs.event(log, logging.WARNING, "schedule_silent", schedule=name, next_run_at=format_instant(next_run_at))
    report.stuck = find_stuck(rt, now)
    for stuck_run in report.stuck:
        logs.event(log, logging.WARNING, "run_stuck", run=stuck_run.run_id, key=stuck_run.key,
                   status=stuck_run.status, since=format_instant(stuck_run.waiting_since), reason=stuck_run.reason)
    _mark_problems(rt, report, now)
    report.late = late_alerts.mark_late(rt, now)
    report.freshness_low = freshness_alerts.mark_low(rt, now)
    return report


def _families(rt: Runtime, report: SweepReport, now: datetime) -> None:
    """Release WAITING parents whose children all finished (a safety net: the last child's finish does it)
    and report children whose parent vanished (SPEC §17)."""
    with rt.store.write() as conn:
        for parent_id in families.waiting_ready(conn):
            if families.release_parent(conn, parent_id):
                report.released.append(parent_id)
                audit_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="run_released",
                                        run_id=parent_id, reason="every child run has finished",
                                        before={"status": "WAITING"}, after={"status": "QUEUED"})
        report.orphans = families.orphans(conn)
    for parent_id in report.released:
        logs.event(log, logging.INFO, "parent_released", run=parent_id, reason="children_finished")
    for child in report.orphans:
        logs.event(log, logging.WARNING, "child_orphaned", run=child.id, key=child.idempotency_key,
                   parent=child.parent_id, status=child.status.value)


def _dependents(rt: Runtime, report: SweepReport, now: datetime) -> None:
    """Dependent runs past their ``after_window`` follow ``on_upstream`` with their alert; any whose upstream
    succeeded are released (a safety net: the upstream's success does it). SPEC §18."""
    with rt.store.write() as conn:
        specs = {s.id: s.spec for s in schedule_rows.list_schedules(conn, include_archived=True)}
        ended = upstream_rows.expire(conn, now, specs, SYSTEM_RECONCILER,
                                     lambda c, run, end: finish.finish_run(c, run, end, now, holder=None))
        ended += upstream_rows.release_ready(conn, now, actor=SYSTEM_RECONCILER)
    freed = {e.schedule_id for e in ended if e.status is not RunStatus.QUEUED}
    if freed:  # after the commit above, so the dependency lock is never taken before a schedule's
        with rt.store.write() as conn:
            for schedule_id in sorted(s for s in freed if s is not None):
                promotion.promote_pending(conn, schedule_id, now)
    report.upstream = [e.run_id for e in ended]
    for e in ended:
        logs.event(log, logging.INFO, "upstream_wait_ended", run=e.run_id, status=e.status.value,
                   waited_s=e.waited_s)


def _mark_problems(rt: Runtime, report: SweepReport, now: datetime) -> None:
    """Stalled runs and silent schedules are alerted once each: an audit event and an outbox row, one commit."""
    with rt.store.write() as conn:
        for run in report.stalled:
            if audit_rows.list_audit(conn, run_id=run.id, action="run_stalled"):
                continue
            audit_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="run_stalled", run_id=run.id,
                                       schedule_id=run.schedule_id, reason="past max_runtime with a live lease")
            outbox.record_run_event(conn, run, alerts.AlertEvent.STALLED, now,
                                    f"run {run.id} {run.idempotency_key} is past its max_runtime and still running",
                                    details={"started_at": format_instant(run.claimed_at)})
        for name, next_run_at in report.silent:
            schedule = schedule_rows.get_schedule(conn, name)
            slot = format_instant(next_run_at)
            seen = audit_rows.list_audit(conn, schedule_id=schedule.id, action="schedule_silent")
            if any((event.after or {}).get("next_run_at") == slot for event in seen):
                continue
            audit_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="schedule_silent",
                                       schedule_id=schedule.id, after={"next_run_at": slot},
                                       reason="no scheduler ticked within the grace period")
            outbox.record_schedule_event(conn, schedule, alerts.AlertEvent.SILENT,
                                         outbox.period_dedupe_key(alerts.AlertEvent.SILENT, name, str(slot)),
                                         now, f"{name}: no scheduler ticked for the slot at {slot}",
                                         details={"next_run_at": slot})
        for waiting in report.stuck:
            owner = schedule_rows.get_schedule(conn, waiting.schedule) if waiting.schedule else None
            criticality = owner.spec.criticality if owner is not None else Criticality.NORMAL
            because = f": {waiting.reason}" if waiting.reason else ""
            outbox.record_event(
                conn, event=alerts.AlertEvent.RUN_STUCK,
                dedupe_key=outbox.run_dedupe_key(alerts.AlertEvent.RUN_STUCK, waiting.run_id), at=now,
                summary=f"run {waiting.run_id} {waiting.key} {waiting.status} and not claimed since "
                        f"{format_instant(waiting.waiting_since)}{because}",
                decision=alerts.decide_severity(alerts.AlertEvent.RUN_STUCK, criticality, 1), schedule=waiting.schedule,
                run_id=waiting.run_id, key=waiting.key,
                details={"status": waiting.status, "reason": waiting.reason,
                         "waiting_since": format_instant(waiting.waiting_since)})


def find_stuck(rt: Runtime, now: datetime) -> list[stuck.StuckRun]:
    """Runs waiting longer than ``[notify] stuck_after`` with no moving queue (``store.waiting.find_stuck``)."""
    with rt.store.read() as conn:
        found = waiting.find_stuck(conn, now, rt.config.notify.stuck_after, rt.config.limits.caps())
        if not found:
            return found
        quiet = {s.name for s in schedule_rows.list_schedules(conn)
                 if calendars.quiet(s, rt.config.maintenance, now)}
    return [run for run in found if run.schedule not in quiet]


def find_problems(rt: Runtime, now: datetime) -> tuple[list[Run], list[tuple[str, datetime]]]:
    """Stalled runs (RUNNING past max_runtime, lease alive) and silent schedules."""
    with rt.store.read() as conn:
        running = run_rows.running_runs(conn)
        live = schedule_rows.list_schedules(conn)
    stalled = [r for r in running if policies.run_is_stalled(r, now)]
    silent = [(s.name, s.next_run_at) for s in live if s.enabled and s.next_run_at is not None
              and policies.is_silent(s.next_run_at, s.spec.grace, now)
              and not calendars.quiet(s, rt.config.maintenance, now)]
    return stalled, silent
