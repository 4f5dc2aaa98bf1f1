"""The reconciler: expired leases, orphaned PENDING runs, stalled runs, silent schedules.

Every decision is a conditional update plus an AuditEvent by
SYSTEM_RECONCILER. Stalled runs and silent schedules are reported, not
touched: a run whose lease still lives is never taken from its worker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.engine import Connection

from engine import errors, policies
from engine.clock import format_instant
from engine.models import (
    SYSTEM_RECONCILER,
    AttemptOutcome,
    AttemptTrigger,
    Run,
    RunStatus,
    StepStatus,
)
from engine.runtime import Runtime
from engine.store import claims
from engine.store import runs as run_rows
from engine.store import schedules as schedule_rows
from engine.store.tables import steps as steps_table

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    recovered: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    promoted: list[int] = field(default_factory=list)
    stalled: list[Run] = field(default_factory=list)
    silent: list[tuple[str, datetime]] = field(default_factory=list)


def _recover(conn: Connection, rt: Runtime, run: Run, now: datetime, reason: str, report: SweepReport,
             *, expired_only: bool = True) -> None:
    """Close the lost attempt and queue a recovery attempt at the step that was running.

    Recovery attempts count toward max_attempts: a run that keeps killing its
    worker ends FAILED.
    """
    if run.attempt_count >= run.max_attempts:
        target = RunStatus.FAILED
        code, message = "LEASE_EXPIRED", f"worker {run.lease_owner} lost the run {run.attempt_count} times"
    else:
        target = RunStatus.RETRY_PENDING
        code, message = "LEASE_EXPIRED", f"worker {run.lease_owner} stopped renewing its lease ({reason})"
    # Guard on the token read and on the lease still being the expired one (or this worker's own).
    claims.release_run(conn, run.id, run.fence, target, now, not_before=now if target is RunStatus.RETRY_PENDING
                         else None, error_code=code, error_message=message,
                         next_attempt_trigger=AttemptTrigger.RECOVERY if target is RunStatus.RETRY_PENDING else None,
                         lease_expired_by=now if expired_only else None)
    conn.execute(steps_table.update().where(steps_table.c.run_id == run.id,
                                            steps_table.c.status == StepStatus.RUNNING.value)
                 .values(status=StepStatus.FAILED.value, error_code=code, error_message=message, finished_at=now))
    claims.finish_attempt(conn, run.id, run.attempt_count, AttemptOutcome.LOST, now, code, message)
    if target is RunStatus.FAILED:
        claims.promote_pending(conn, run.schedule_id, now)
        report.failed.append(run.id)
    else:
        report.recovered.append(run.id)
    schedule_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="run_recovered", run_id=run.id,
                               schedule_id=run.schedule_id, reason=reason,
                               before={"status": "RUNNING", "lease_owner": run.lease_owner, "token": run.fence},
                               after={"status": target.value})


def _log_recovery(run: Run, report: SweepReport, reason: str) -> None:
    """Logged after the commit: nothing is written to a log while the write lock is held."""
    status = RunStatus.FAILED if run.id in report.failed else RunStatus.RETRY_PENDING
    log.warning("run_recovered run=%s key=%s owner=%s status=%s reason=%s", run.id, run.idempotency_key,
                run.lease_owner, status.value, reason)


def reclaim_own(rt: Runtime, worker_id: str) -> list[int]:
    """Runs still RUNNING under ``worker_id`` (a dead predecessor with this id) become recovery attempts now."""
    now = rt.clock.now()
    report = SweepReport()
    with rt.store.read() as conn:
        mine = run_rows.running_runs(conn, owner=worker_id)
    for run in mine:
        try:
            with rt.store.write() as conn:
                _recover(conn, rt, run, now, f"worker {worker_id} restarted", report, expired_only=False)
        except errors.LeaseLost:
            continue
        _log_recovery(run, report, f"worker {worker_id} restarted")
    return report.recovered + report.failed


def sweep(rt: Runtime) -> SweepReport:
    """One reconciler pass at ``rt.clock.now()``."""
    now = rt.clock.now()
    report = SweepReport()
    with rt.store.read() as conn:
        expired = run_rows.expired_leases(conn, now)
    for run in expired:
        try:
            with rt.store.write() as conn:
                _recover(conn, rt, run, now, "lease expired", report)
        except errors.LeaseLost:  # the worker came back and renewed, or another reconciler won
            continue
        _log_recovery(run, report, "lease expired")
    with rt.store.write() as conn:
        for schedule_id in run_rows.orphaned_pending(conn):
            promoted = claims.promote_pending(conn, schedule_id, now)
            if promoted is not None:
                report.promoted.append(promoted)
                schedule_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="run_promoted",
                                           run_id=promoted, schedule_id=schedule_id, reason="blocker gone",
                                           before={"status": "PENDING"}, after={"status": "QUEUED"})
    for promoted in report.promoted:
        log.info("run_promoted run=%s reason=blocker_gone", promoted)
    report.stalled, report.silent = find_problems(rt, now)
    for run in report.stalled:
        log.warning("run_stalled run=%s key=%s started_at=%s", run.id, run.idempotency_key, run.started_at)
    for name, next_run_at in report.silent:
        log.warning("schedule_silent schedule=%s next_run_at=%s", name, next_run_at.isoformat())
    _notify_once(rt, report, now)
    return report


def _notify_once(rt: Runtime, report: SweepReport, now: datetime) -> None:
    """Stalled runs and silent schedules are notified once each (an audit event marks it)."""
    with rt.store.write() as conn:
        for run in report.stalled:
            if schedule_rows.list_audit(conn, run_id=run.id, action="run_stalled"):
                continue
            schedule_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="run_stalled", run_id=run.id,
                                       schedule_id=run.schedule_id, reason="past max_runtime with a live lease")
            rt.notifier.send("run_stalled", run_id=run.id, key=run.idempotency_key,
                             started_at=format_instant(run.claimed_at))
        for name, next_run_at in report.silent:
            schedule = schedule_rows.get_schedule(conn, name)
            slot = format_instant(next_run_at)
            seen = schedule_rows.list_audit(conn, schedule_id=schedule.id, action="schedule_silent")
            if any((event.after or {}).get("next_run_at") == slot for event in seen):
                continue
            schedule_rows.record_audit(conn, at=now, actor=SYSTEM_RECONCILER, action="schedule_silent",
                                       schedule_id=schedule.id, after={"next_run_at": slot},
                                       reason="no scheduler ticked within the grace period")
            rt.notifier.send("schedule_silent", schedule=name, next_run_at=slot)


def find_problems(rt: Runtime, now: datetime) -> tuple[list[Run], list[tuple[str, datetime]]]:
    """Stalled runs (RUNNING past max_runtime, lease alive) and silent schedules."""
    with rt.store.read() as conn:
        running = run_rows.running_runs(conn)
        live = schedule_rows.list_schedules(conn)
    stalled = [r for r in running if not policies.lease_expired(r.lease_until, now)
               and policies.is_stalled(r.claimed_at, timedelta(seconds=r.max_runtime_s), now)]
    silent = [(s.name, s.next_run_at) for s in live if s.enabled and s.next_run_at is not None
              and policies.is_silent(s.next_run_at, s.spec.grace, now)]
    return stalled, silent
