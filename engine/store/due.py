"""The due-schedule predicate and the next-wake query, without the table definitions.

A nothing-due ``tick`` that takes the fast path (``engine.cli.fast_tick``) asks
only for the earliest ``next_run_at`` of a live schedule; importing
``engine.store.tables`` (every table, the models' enums) would cost it more
than the query. ``engine.store.tables`` builds its partial index from
``LIVE_SCHEDULE`` here, and the full tick asks ``next_wake`` the same question.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Integer, Select, String, column, func, or_, select, table, text
from sqlalchemy.engine import Connection

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


def next_wake(conn: Connection) -> datetime | None:
    """The earliest ``next_run_at`` of any live schedule (when the next tick has work), or None."""
    at: datetime | None = conn.execute(next_wake_query()).scalar()
    return at


_INSTANCES = table("instances", column("id", String()), column("last_seen_at", UTCDateTime()))
#: A fast-path tick whose host's scheduler beat is older than this takes the full path, which beats.
BEAT_STALE_AFTER = timedelta(minutes=5)


def scheduler_id(host: str) -> str:
    """The heartbeat row of whatever ticks on ``host`` (``serve``, ``cycle`` or ``tick``): one per host."""
    return f"scheduler@{host}"


def scheduler_beat_query(instance_id: str) -> Select[Any]:
    """When the scheduler of this host last beat (``store.instances.scheduler_id``): a fast-path tick whose
    beat is stale takes the full path, which beats, so ``doctor`` can tell a scheduler is alive."""
    return select(_INSTANCES.c.last_seen_at).where(_INSTANCES.c.id == instance_id)


_EVENTS = table("events", column("status"), column("attempts"), column("next_try_at", UTCDateTime()))


def retry_due_query(now: datetime) -> Select[Any]:
    """An alert whose delivery failed and is due again at ``now`` (then a ``tick`` takes its full path and sends).

    Only events tried before: with no target configured nothing is tried, and a quiet tick stays quiet.
    """
    return select(_EVENTS.c.status).where(_EVENTS.c.status == "PENDING", _EVENTS.c.attempts > 0,
                                          _EVENTS.c.next_try_at <= now).limit(1)
_SCHEDULES = table("schedules", column("next_run_at", UTCDateTime()), column("enabled"))
_RUNS = table("runs", column("status", String()), column("not_before", UTCDateTime()),
              column("lease_until", UTCDateTime()), column("claimed_at", UTCDateTime()),
              column("max_runtime_s", Integer()))


def pending_due_query(now: datetime) -> Select[Any]:
    """An alert waiting to be sent at ``now``: never tried yet (a crash between its commit and its POST),
    or due again after a failed try."""
    return select(_EVENTS.c.status).where(_EVENTS.c.status == "PENDING", or_(
        _EVENTS.c.next_try_at.is_(None), _EVENTS.c.next_try_at <= now)).limit(1)


def next_enabled_query() -> Select[Any]:
    """The earliest ``next_run_at`` of an enabled schedule: due, or silent past its grace, once it is <= now."""
    return select(func.min(_SCHEDULES.c.next_run_at)).where(_SCHEDULES.c.enabled.is_(True))


def work_query(now: datetime, *, claimable_only: bool = False) -> Select[Any]:
    """(status, lease_until, claimed_at, max_runtime_s) of the runs an idle ``cycle`` must not skip:
    claimable now, PENDING, WAITING (the reconciler releases a parent whose children are done), or
    RUNNING (the caller tells a live lease from one to reconcile);
    ``claimable_only``: those a ``work --until-idle`` would claim."""
    from engine.core.models import CLAIMABLE_STATUSES, RunStatus  # here: a nothing-due tick does not need it

    runs = _RUNS.c
    claimable = runs.status.in_([s.value for s in CLAIMABLE_STATUSES]) & or_(
        runs.not_before.is_(None), runs.not_before <= now)
    wanted = claimable if claimable_only else or_(
        claimable, runs.status.in_([RunStatus.PENDING.value, RunStatus.RUNNING.value, RunStatus.WAITING.value]))
    return select(runs.status, runs.lease_until, runs.claimed_at, runs.max_runtime_s).where(wanted).limit(100)


_WAITS = table("run_waits", column("check_after", UTCDateTime()))


def waits_due_query(now: datetime) -> Select[Any]:
    """A run waiting for a provider whose look has come at ``now`` (SPEC §15.5): an idle ``cycle`` takes its
    full path then, to probe the provider and queue the run again once it answers."""
    return select(_WAITS.c.check_after).where(_WAITS.c.check_after <= now).limit(1)


def waiting_query(now: datetime) -> Select[int, Any, int]:
    """(QUEUED/RETRY_PENDING runs whose ``not_before`` is after ``now``, the earliest of those, PENDING runs):
    what an idle ``work`` or ``cycle`` names as waiting (``core.backlog``), in one row."""
    runs = _RUNS.c
    later = runs.status.in_(["QUEUED", "RETRY_PENDING"]) & (runs.not_before > now)
    return select(func.count().filter(later),
                  func.min(runs.not_before).filter(later),
                  func.count().filter(runs.status == "PENDING"))


def disabled_query() -> Select[Any]:
    """A disabled schedule, if any (its waiting runs are held)."""
    return select(_SCHEDULES.c.enabled).where(_SCHEDULES.c.enabled.is_(False)).limit(1)


_BACKUPS = table("backups", column("slot_at", UTCDateTime()), column("next_slot_at", UTCDateTime()),
                 column("cron", String()))


def backup_slot_query() -> Select[Any]:
    """(the next slot, the cron it was computed from) of the latest backup slot claimed: with ``[store] backup``,
    an idle ``cycle`` takes its full path when there is none, the cron changed, or that next slot has come."""
    return select(_BACKUPS.c.next_slot_at, _BACKUPS.c.cron).order_by(_BACKUPS.c.slot_at.desc()).limit(1)
