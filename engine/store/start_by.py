"""A scheduled run not started by its schedule's ``start_by`` becomes MISSED, with its audit and its alert.

Written by whichever comes first: a worker about to claim the run (``claims.acquire_run``'s ``skip``), or
the reconciler's pass for runs no worker looks at (still PENDING behind an overlap). One transaction each,
so the end (``finish.finish_run``, the one end of a run), the audit row and the ``slots_not_run`` alert
commit together.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy.engine import Connection

from engine.core import alerts, policies
from engine.core.clock import format_instant
from engine.core.models import AttemptOutcome, Run, RunStatus, SlotReason
from engine.core.run_end import RunEnd
from engine.core.schedule_spec import Schedule
from engine.store import audit_rows, finish, outbox


def miss(conn: Connection, schedule: Schedule, run: Run, now: datetime, *, actor: str) -> None:
    """Record ``run`` MISSED for ``start_by`` (its schedule's), audited as ``actor``, with its alert; the
    schedule's next PENDING run is promoted (``finish_run``'s after-effects)."""
    assert schedule.spec.start_by is not None
    finish.finish_run(conn, run, RunEnd(RunStatus.MISSED, AttemptOutcome.CANCELLED, reason=SlotReason.START_BY.value,
                                        note="not started by its start_by"), now, holder=None)
    audit_rows.record_audit(conn, at=now, actor=actor, action="run_missed", run_id=run.id, schedule_id=schedule.id,
                            reason="start_by", before={"status": run.status.value}, after={"status": "MISSED"})
    outbox.record_schedule_event(
        conn, schedule, alerts.AlertEvent.SLOTS_NOT_RUN,
        outbox.period_dedupe_key(alerts.AlertEvent.SLOTS_NOT_RUN, schedule.name, run.scheduled_for), now,
        f"{schedule.name} {run.business_key}: not started by {format_instant(run.scheduled_for + schedule.spec.start_by)}"
        " (start_by): MISSED; `reportflow runs retry` runs it", business_key=run.business_key,
        details={"run": run.id, "reason": "start_by"})


def miss_if_late(conn: Connection, timed: Mapping[int, Schedule], run: Run, now: datetime, *, actor: str) -> bool:
    """``miss`` ``run`` when it is past its schedule's ``start_by`` (``timed``: the schedules that have one, by
    id); whether it did (the claim then takes the next candidate)."""
    schedule = timed.get(run.schedule_id) if run.schedule_id is not None else None
    if schedule is None or not policies.past_start_by(run, schedule.spec.start_by, now):
        return False
    miss(conn, schedule, run, now, actor=actor)
    return True
