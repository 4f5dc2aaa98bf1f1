"""The runs that have not started, counted by what they wait for (``core.backlog``): one aggregate query."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import case, func, select, type_coerce
from sqlalchemy.engine import Connection

from engine.core import backlog
from engine.core.models import HOLDABLE_STATUSES, PRIORITY, AttemptTrigger, RunStatus
from engine.store.run_rows import family_schedule_disabled
from engine.store.tables import runs
from engine.store.types import UTCDateTime

BACKFILL_PRIORITY = PRIORITY[AttemptTrigger.BACKFILL]


def count_backlog(conn: Connection, now: datetime) -> backlog.Backlog:
    """PENDING, QUEUED and RETRY_PENDING runs by what holds them at ``now``, and the backfills RUNNING.

    Each run counts once, under the first that applies: held (schedule disabled),
    PENDING (overlap), a ``not_before`` ahead, a backfill, anything else.
    """
    category = case(
        (family_schedule_disabled(), "held"),
        (runs.c.status == RunStatus.PENDING.value, "pending"),
        (runs.c.not_before > now, "later"),
        (runs.c.priority == BACKFILL_PRIORITY, "backfill"),
        else_="other").label("category")
    query = (select(category, runs.c.workflow, func.count(),
                    type_coerce(func.min(runs.c.not_before), UTCDateTime()).label("next_at"))
             .where(runs.c.status.in_([s.value for s in HOLDABLE_STATUSES]))
             .group_by(category, runs.c.workflow))
    counts: dict[str, int] = {}
    due_of: dict[str, tuple[int, int]] = {}
    next_at: datetime | None = None
    for name, workflow, count, first in conn.execute(query):
        counts[name] = counts.get(name, 0) + int(count)
        if name == "later" and first is not None:
            next_at = first if next_at is None else min(next_at, first)
        if name in ("other", "backfill"):
            other, backfill = due_of.get(workflow, (0, 0))
            due_of[workflow] = (other + int(count), backfill) if name == "other" else (other, backfill + int(count))
    running_of: dict[str, int] = {}
    running = running_backfills = 0
    for workflow, backfills, count in conn.execute(
            select(runs.c.workflow, runs.c.priority == BACKFILL_PRIORITY, func.count())
            .where(runs.c.status == RunStatus.RUNNING.value).group_by(runs.c.workflow, runs.c.priority)):
        running += count
        running_of[workflow] = running_of.get(workflow, 0) + count
        running_backfills += count if backfills else 0
    return backlog.Backlog(held=counts.get("held", 0), pending=counts.get("pending", 0),
                           later=counts.get("later", 0), next_at=next_at, backfill=counts.get("backfill", 0),
                           running_backfills=running_backfills, other=counts.get("other", 0), running=running,
                           running_of=running_of, due_of=due_of)
