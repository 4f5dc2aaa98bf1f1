"""The audit trail: who did what to a schedule or a run, and why. Functions take a Connection inside a transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from engine.core import inputs
from engine.core.audit import AuditEvent
from engine.store.tables import audit_events


def record_audit(conn: Connection, *, at: datetime, actor: str, action: str, schedule_id: int | None = None,
                 run_id: int | None = None, before: dict[str, Any] | None = None,
                 after: dict[str, Any] | None = None, reason: str | None = None, version: int | None = None) -> None:
    """Write one audit event in the caller's transaction."""
    conn.execute(insert(audit_events).values(
        at=at, actor=actor, action=action, schedule_id=schedule_id, run_id=run_id,
        before=before, after=after, reason=reason, version=version))


def record_audits(conn: Connection, events: Sequence[dict[str, Any]]) -> None:
    """Write several audit events in one statement."""
    if events:
        conn.execute(insert(audit_events), list(events))


def list_audit(conn: Connection, *, schedule_id: int | None = None, run_id: int | None = None,
               action: str | None = None) -> list[AuditEvent]:
    """Audit events by schedule, run or action, oldest first."""
    query = select(audit_events).order_by(audit_events.c.id)
    if schedule_id is not None:
        query = query.where(audit_events.c.schedule_id == schedule_id)
    if run_id is not None:
        query = query.where(audit_events.c.run_id == run_id)
    if action is not None:
        query = query.where(audit_events.c.action == action)
    return [AuditEvent(**dict(r)) for r in conn.execute(query).mappings()]


def too_old_ranges(conn: Connection, schedule_id: int) -> list[tuple[datetime, datetime]]:
    """The [from, to) ranges of slots the tick found too old to record (``slots_too_old``): no row, never run."""
    query = (select(audit_events.c.after).where(audit_events.c.schedule_id == schedule_id,
                                                  audit_events.c.action == "slots_too_old"))
    out = []
    for (after,) in conn.execute(query):
        if isinstance(after, dict) and isinstance(after.get("from"), str) and isinstance(after.get("to"), str):
            out.append((inputs.instant(after["from"]), inputs.instant(after["to"])))
    return out
