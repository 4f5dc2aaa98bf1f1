"""SQL of the data lifecycle: prune candidates, guarded deletes, the prune audit.

Deletes run in short batches (one write transaction each) and repeat the
guard in SQL: only runs still in a terminal status are removed, so a run an
operator re-queued between the read and the delete is left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, or_, select
from sqlalchemy.engine import Connection

from engine.core import retention
from engine.core.models import TERMINAL_STATUSES, RunStatus
from engine.store.tables import artifacts, attempts, audit_events, run_waits, runs, schedules, steps

_TERMINAL = [s.value for s in TERMINAL_STATUSES]


def list_candidates(conn: Connection, *, bound: datetime, after_id: int, limit: int) -> list[retention.PruneCandidate]:
    """Finished runs with a slot before ``bound`` and an id above ``after_id``, in id order."""
    query = (select(runs.c.id, runs.c.schedule_id, runs.c.business_key, runs.c.status, runs.c.scheduled_for,
                    runs.c.trigger_type)
             .where(runs.c.id > after_id, runs.c.status.in_(_TERMINAL), runs.c.scheduled_for < bound)
             .order_by(runs.c.id).limit(limit))
    return [retention.PruneCandidate(r.id, r.schedule_id, r.business_key, RunStatus(r.status), r.scheduled_for,
                                     r.trigger_type)
            for r in conn.execute(query)]


def max_run_id(conn: Connection) -> int:
    """The highest run id (0 for none)."""
    return int(conn.execute(select(runs.c.id).order_by(runs.c.id.desc()).limit(1)).scalar() or 0)


def schedule_clock(conn: Connection) -> tuple[dict[int, str], dict[int, datetime | None]]:
    """Every schedule's timezone and ``next_run_at`` (archived ones included)."""
    timezones: dict[int, str] = {}
    upcoming: dict[int, datetime | None] = {}
    for row in conn.execute(select(schedules.c.id, schedules.c.definition, schedules.c.next_run_at)):
        timezones[row.id] = str((row.definition or {}).get("timezone", "UTC"))
        upcoming[row.id] = row.next_run_at
    return timezones, upcoming


def delete_runs(conn: Connection, run_ids: Sequence[int]) -> dict[int, str]:
    """Delete these runs (steps, attempts, artifact rows and their own audit events too) if still finished.

    A family goes together (SPEC §17): a parent takes its children along, only when
    every one of them is finished too; a child is never removed without its parent.
    Returns {id: status} of the runs removed; the others are untouched.
    """
    if not run_ids:
        return {}
    chosen = set(run_ids)
    query = select(runs.c.id, runs.c.status, runs.c.parent_id).where(
        or_(runs.c.id.in_(list(chosen)), runs.c.parent_id.in_(list(chosen))))
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    found = conn.execute(query).all()
    family = {int(r.id): (str(r.status), r.parent_id) for r in found
              if r.parent_id is None or r.parent_id in chosen}  # a child goes only with its parent
    unfinished = {parent if parent is not None else run_id for run_id, (status, parent) in family.items()
                  if status not in _TERMINAL}
    removed = {run_id: status for run_id, (status, parent) in family.items()
               if run_id not in unfinished and parent not in unfinished}
    if not removed:
        return {}
    ids = list(removed)
    for table in (audit_events, artifacts, attempts, steps, run_waits):
        conn.execute(delete(table).where(table.c.run_id.in_(ids)))
    conn.execute(delete(runs).where(runs.c.id.in_(ids), runs.c.parent_id.is_not(None)))  # children first
    conn.execute(delete(runs).where(runs.c.id.in_(ids)))
    return removed


def pruned_ranges(conn: Connection, schedule_id: int) -> list[retention.PrunedRange]:
    """The business-date ranges pruned from a schedule, from its prune audit events."""
    query = select(audit_events.c.after).where(audit_events.c.schedule_id == schedule_id,
                                               audit_events.c.action == retention.PRUNE_ACTION)
    found = (retention.range_from_audit(schedule_id, row.after) for row in conn.execute(query))
    return [r for r in found if r is not None]
