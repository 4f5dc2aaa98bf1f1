"""A scheduled run not started by its schedule's ``start_by`` becomes MISSED, with its audit and its alert.

Written by whichever comes first: a worker about to claim the run (``claims.acquire_run``), or the
reconciler's pass for runs no worker looks at (still PENDING behind an overlap). One transaction each,
so the status, the audit row and the ``slots_not_run`` alert commit together.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Connection

from engine.core import alerts
from engine.core.clock import format_instant
from engine.core.models import Run, RunStatus, Schedule, SlotReason
from engine.store import audit_rows, outbox, promotion, run_rows


def miss(conn: Connection, schedule: Schedule, run: Run, now: datetime, *, actor: str) -> None:
    """Record ``run`` MISSED for ``start_by`` (its schedule's), audited as ``actor``, with its alert; the
    schedule's next PENDING run is promoted."""
    assert schedule.spec.start_by is not None
    run_rows.set_status(conn, run.id, RunStatus.MISSED, reason=SlotReason.START_BY.value, completed_at=now)
    audit_rows.record_audit(conn, at=now, actor=actor, action="run_missed", run_id=run.id, schedule_id=schedule.id,
                            reason="start_by", before={"status": run.status.value}, after={"status": "MISSED"})
    outbox.record_schedule_event(
        conn, schedule, alerts.AlertEvent.SLOTS_NOT_RUN,
        outbox.period_dedupe_key(alerts.AlertEvent.SLOTS_NOT_RUN, schedule.name, run.scheduled_for), now,
        f"{schedule.name} {run.business_key}: not started by {format_instant(run.scheduled_for + schedule.spec.start_by)}"
        " (start_by): MISSED; `reportflow runs retry` runs it", business_key=run.business_key,
        details={"run": run.id, "reason": "start_by"})
    promotion.promote_pending(conn, schedule.id, now)
