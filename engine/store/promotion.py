"""A schedule's next run: the oldest PENDING one is queued once no other scheduled run of it is in flight (SPEC §3.4).

Asked by whatever frees a schedule's slot (a run's end, ``engine.store.finish``) and by
the reconciler's safety net, under the schedule's lock (``locks.lock_schedule_runs``)
that the tick takes too while it adds PENDING runs, so a PENDING run is never stranded.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.engine import Connection

from engine.core import transitions
from engine.core.models import BUSY_STATUSES, RunStatus, RunTrigger
from engine.store import locks, upstream_rows
from engine.store.fastsql import execute as fast
from engine.store.tables import runs

P = bindparam
_BUSY = select(func.count()).where(
    runs.c.schedule_id == P("b_schedule"), runs.c.trigger_type == RunTrigger.SCHEDULED.value,
    runs.c.status.in_([s.value for s in BUSY_STATUSES]))
_OLDEST_PENDING = (select(runs.c.id).where(runs.c.schedule_id == P("b_schedule"),
                                           runs.c.status == RunStatus.PENDING.value)
                   .order_by(runs.c.scheduled_for, runs.c.id).limit(1))
_PROMOTE = update(runs).where(runs.c.id == P("b_id"), runs.c.status == RunStatus.PENDING.value).values(
    status=RunStatus.QUEUED.value)


def promote_pending(conn: Connection, schedule_id: int | None, now: datetime) -> int | None:
    """Queue the oldest PENDING run of a schedule when no other scheduled run of it is in flight; its id.

    Serialised with the tick that may be adding PENDING runs to the same
    schedule (``locks.lock_schedule_runs``), so a PENDING run is never stranded.
    """
    if schedule_id is None:
        return None
    params = {"b_schedule": schedule_id}
    locks.lock_schedule_runs(conn, schedule_id)
    first = fast(conn, _OLDEST_PENDING, params).fetchone()
    oldest = None if first is None else first[0]
    if oldest is None or fast(conn, _BUSY, params).fetchone()[0]:
        return None
    transitions.transition(RunStatus.PENDING, RunStatus.QUEUED)
    fast(conn, _PROMOTE, {"b_id": oldest})
    upstream_rows.hold(conn, int(oldest), now)  # a dependent run then waits for its upstream (SPEC §18)
    return int(oldest)
