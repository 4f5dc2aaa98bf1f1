"""The alerts page's reads of the outbox: every event, filtered by severity, schedule and delivery, keyset-paged
by row id (newest first), and how many wait to be delivered."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from engine.core import alerts
from engine.store import outbox
from engine.store.tables import events

# A delivery state as the page names it, and the rows it is: a failed try leaves the row PENDING with attempts.
DELIVERY_STATES = ("pending", "failed", "sent", "quiet")
_STATUS = events.c.status


def _delivery(state: str) -> ColumnElement[bool]:
    pending = _STATUS == alerts.EventStatus.PENDING.value
    return {"pending": pending & (events.c.attempts == 0), "failed": pending & (events.c.attempts > 0),
            "sent": _STATUS == alerts.EventStatus.DELIVERED.value,
            "quiet": _STATUS == alerts.EventStatus.QUIET.value}[state]


@dataclass(frozen=True)
class AlertFilter:
    """What the alerts page filters on; every field optional (``delivery`` holds DELIVERY_STATES)."""

    severities: tuple[str, ...] = ()
    schedule: str | None = None
    delivery: tuple[str, ...] = ()


def list_alerts(conn: Connection, filt: AlertFilter, *, before_id: int | None,
                limit: int) -> list[tuple[int, alerts.Alert]]:
    """Events matching ``filt`` with their row ids, newest first, strictly older than ``before_id``."""
    query = select(events).order_by(events.c.id.desc()).limit(limit)
    if filt.severities:
        query = query.where(events.c.severity.in_(list(filt.severities)))
    if filt.schedule is not None:
        query = query.where(events.c.schedule == filt.schedule)
    if filt.delivery:
        query = query.where(or_(*(_delivery(state) for state in filt.delivery)))
    if before_id is not None:
        query = query.where(events.c.id < before_id)
    return [(int(r["id"]), outbox.alert_from_row(r)) for r in conn.execute(query).mappings()]


def delivery_counts(conn: Connection) -> dict[str, int]:
    """How many events are in each delivery state (states with none are left out)."""
    counts: dict[str, int] = {}
    for state in DELIVERY_STATES:
        counts[state] = int(conn.execute(select(func.count()).select_from(events).where(_delivery(state)))
                            .scalar_one())
    return {state: n for state, n in counts.items() if n}


def alert_schedules(conn: Connection) -> list[str]:
    """The schedule names any event was raised for, sorted (old names of renamed schedules included)."""
    query = select(events.c.schedule).distinct().where(events.c.schedule.is_not(None)).order_by(events.c.schedule)
    return [str(name) for name in conn.execute(query).scalars()]
