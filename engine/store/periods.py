"""The latest revision of each period of a schedule, for success rate, freshness and late periods."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from engine.core import slo
from engine.core.models import RunStatus
from engine.store.tables import runs


def period_facts(conn: Connection, schedule_id: int, start: datetime, end: datetime) -> dict[datetime, slo.PeriodFact]:
    """Each period with ``start <= scheduled_for <= end``: its latest revision's status and completion."""
    query = (select(runs.c.scheduled_for, runs.c.status, runs.c.completed_at)
             .where(runs.c.schedule_id == schedule_id, runs.c.scheduled_for >= start, runs.c.scheduled_for <= end)
             .order_by(runs.c.scheduled_for, runs.c.revision, runs.c.id))
    facts: dict[datetime, slo.PeriodFact] = {}
    for slot, status, completed_at in conn.execute(query):
        facts[slot] = slo.PeriodFact(slot, RunStatus(status), completed_at)  # the last row is the latest revision
    return facts
