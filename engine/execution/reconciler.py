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

from engine.core import errors, logs, policies, reports
from engine.core.clock import format_instant
from engine.core.models import SYSTEM_RECONCILER, Run, RunStatus
from engine.runtime import Runtime
from engine.store import audit as audit_rows
from engine.store import claims, families, recovery
from engine.store import runs as run_rows
from engine.store import schedules as schedule_rows

log = logging.getLogger(__name__)


SweepReport = reports.SweepReport


def _recover(conn: Connection, run: Run, now: datetime, reason: str, report: SweepReport,
             *, expired_only: bool = True) -> None:
    """Load, decide (``policies.decide_recovery``), persist (``store.recovery``): one transaction."""
    decision = policies.decide_recovery(attempts_used=run.attempt_count, max_attempts=run.max_attempts,
                                        lease_owner=run.lease_owner, reason=reason, now=now)
    recovery.record_recovery(conn, run, decision, now, expired_only=expired_only)
    if decision.status is RunStatus.FAILED:
        report.failed.append(run.id)
        report.notifications.append(("run_failed", {"run_id": run.id, "key": run.idempotency_key,
                                                    "error_code": decision.error_code,
                                                    "error": decision.error_message}))
    else:
        report.recovered.append(run.id)
    audit_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="run_recovered", run_id=run.id,
                               schedule_id=run.schedule_id, reason=reason,
                               before={"status": "RUNNING", "lease_owner": run.lease_owner, "token": run.fence},
                               after={"status": decision.status.value})


def _log_recovery(run: Run, report: SweepReport, reason: str) -> None:
    """Logged after the commit: nothing is written to a log while the write lock is held."""
    status = RunStatus.FAILED if run.id in report.failed else RunStatus.RETRY_PENDING
    logs.event(log, logging.WARNING, "run_recovered", run=run.id, key=run.idempotency_key, owner=run.lease_owner,
               status=status.value, reason=reason)


def _deliver(rt: Runtime, report: SweepReport) -> None:
    """Send the notifications decided so far; called only with no transaction open.

    A webhook that hangs or refuses costs this process its timeout, never the
    database's write lock; ``Notifier.send`` logs and counts the failure.
    """
    notifier = rt.notifier
    pending, report.notifications = report.notifications, []
    for event, fields in pending:
        notifier.send(event, **fields)


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
    _deliver(rt, report)
    return report.recovered + report.failed


def sweep(rt: Runtime) -> SweepReport:
    """One reconciler pass at ``rt.clock.now()``.

    Each decision commits in its own transaction; log lines and webhook
    notifications follow the commit, never inside it.
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
            promoted = claims.promote_pending(conn, schedule_id, now)
            if promoted is not None:
                report.promoted.append(promoted)
                audit_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="run_promoted",
                                           run_id=promoted, schedule_id=schedule_id, reason="blocker gone",
                                           before={"status": "PENDING"}, after={"status": "QUEUED"})
    for promoted in report.promoted:
        logs.event(log, logging.INFO, "run_promoted", run=promoted, reason="blocker_gone")
    _families(rt, report, now)
    report.stalled, report.silent = find_problems(rt, now)
    for run in report.stalled:
        logs.event(log, logging.WARNING, "run_stalled", run=run.id, key=run.idempotency_key,
                   claimed_at=format_instant(run.claimed_at))
    for name, next_run_at in report.silent:
        logs.event(log, logging.WARNING, "schedule_silent", schedule=name, next_run_at=format_instant(next_run_at))
    _mark_problems(rt, report, now)
    _deliver(rt, report)
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


def _mark_problems(rt: Runtime, report: SweepReport, now: datetime) -> None:
    """Stalled runs and silent schedules are notified once each (an audit event marks it).

    The audit event commits first; the notification is queued on ``report``.
    """
    with rt.store.write() as conn:
        for run in report.stalled:
            if audit_rows.list_audit(conn, run_id=run.id, action="run_stalled"):
                continue
            audit_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="run_stalled", run_id=run.id,
                                       schedule_id=run.schedule_id, reason="past max_runtime with a live lease")
            report.notifications.append(("run_stalled", {"run_id": run.id, "key": run.idempotency_key,
                                                         "started_at": format_instant(run.claimed_at)}))
        for name, next_run_at in report.silent:
            schedule = schedule_rows.get_schedule(conn, name)
            slot = format_instant(next_run_at)
            seen = audit_rows.list_audit(conn, schedule_id=schedule.id, action="schedule_silent")
            if any((event.after or {}).get("next_run_at") == slot for event in seen):
                continue
            audit_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="schedule_silent",
                                       schedule_id=schedule.id, after={"next_run_at": slot},
                                       reason="no scheduler ticked within the grace period")
            report.notifications.append(("schedule_silent", {"schedule": name, "next_run_at": slot}))


def find_problems(rt: Runtime, now: datetime) -> tuple[list[Run], list[tuple[str, datetime]]]:
    """Stalled runs (RUNNING past max_runtime, lease alive) and silent schedules."""
    with rt.store.read() as conn:
        running = run_rows.running_runs(conn)
        live = schedule_rows.list_schedules(conn)
    stalled = [r for r in running if policies.run_is_stalled(r, now)]
    silent = [(s.name, s.next_run_at) for s in live if s.enabled and s.next_run_at is not None
              and policies.is_silent(s.next_run_at, s.spec.grace, now)]
    return stalled, silent
