"""The due-schedule predicate and the next-wake query, without the table definitions.

A nothing-due ``tick`` that takes the fast path (``engine.cli.fast_tick``) asks
only for the earliest ``next_run_at`` of a live schedule; importing
``engine.store.tables`` (every table, the models' enums) would cost it more
than the query. ``engine.store.tables`` builds its partial index from
``LIVE_SCHEDULE`` here, and ``engine.scheduling.tick.next_wake`` runs the same query
on the full table.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, column, func, select, table, text

from engine.store.types import UTCDateTime

# The due-schedule predicate, written once: queries must repeat the partial index's own text,
# because neither database proves `enabled IS true AND archived IS false` implies it.
LIVE_SCHEDULE = "enabled AND NOT archived"

# ``schedules.next_run_at`` as a bare column of a bare table: the same SQL, no MetaData.
NEXT_RUN_AT: ColumnElement[datetime] = table("schedules", column("next_run_at", UTCDateTime())).c.next_run_at


def next_wake_query(next_run_at: ColumnElement[Any] = NEXT_RUN_AT) -> Select[Any]:
    """The earliest ``next_run_at`` of a live schedule: the next tick with work, and, compared with
    ``now``, whether one is due (a schedule is due when live with ``next_run_at <= now``)."""
    return select(func.min(next_run_at)).where(text(LIVE_SCHEDULE))


_EVENTS = table("events", column("status"), column("attempts"), column("next_try_at", UTCDateTime()))


def retry_due_query(now: datetime) -> Select[Any]:
    """An alert whose delivery failed and is due again at ``now`` (then a ``tick`` takes its full path and sends).

    Only events tried before: with no target configured nothing is tried, and a quiet tick stays quiet.
    """
    return select(_EVENTS.c.status).where(_EVENTS.c.status == "PENDING", _EVENTS.c.attempts > 0,
                                          _EVENTS.c.next_try_at <= now).limit(1)
