"""Schedule rows. Functions take a Connection inside a transaction (the audit trail is ``store.audit``)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, func, insert, select, text, update
from sqlalchemy.engine import Connection

from engine.core import errors, redact
from engine.core.models import Run
from engine.core.schedule_spec import SCHEDULE_RANK, Schedule, ScheduleSpec
from engine.store import fastsql, rows, run_rows
from engine.store.due import LIVE_SCHEDULE
from engine.store.tables import runs, schedules


def get_schedule(conn: Connection, name: str) -> Schedule:
    """The schedule named ``name``; raises NotFound."""
    row = conn.execute(select(schedules).where(schedules.c.name == name)).mappings().first()
    if row is None:
        names = list(conn.execute(select(schedules.c.name).where(schedules.c.archived.is_(False))).scalars())
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise errors.NotFound(f"no schedule named '{redact.neutralise(name)[:100]}' ({hint}see `reportflow schedules list`)")
    return rows.schedule_from_row(row)


def last_runs(conn: Connection, schedule_ids: Sequence[int]) -> dict[int, Run]:
    """Each schedule's latest run by slot (of its latest slot's rows, the highest id), keyed by schedule id."""
    if not schedule_ids:
        return {}
    latest = (select(runs.c.schedule_id, func.max(runs.c.scheduled_for).label("at"))
              .where(runs.c.schedule_id.in_(list(schedule_ids)))
              .group_by(runs.c.schedule_id).subquery())
    query = (select(runs).join(latest, (runs.c.schedule_id == latest.c.schedule_id)
                               & (runs.c.scheduled_for == latest.c.at))
             .order_by(runs.c.id))
    return {row["schedule_id"]: rows.run_from_row(row) for row in conn.execute(query).mappings()}


def get_schedule_by_id(conn: Connection, schedule_id: int) -> Schedule:
    """The schedule with id ``schedule_id``."""
    row = conn.execute(select(schedules).where(schedules.c.id == schedule_id)).mappings().one()
    return rows.schedule_from_row(row)


def list_schedules(conn: Connection, *, include_archived: bool = False) -> list[Schedule]:
    """Schedules by name, archived ones only if asked."""
    query = select(schedules).order_by(schedules.c.name)
    if not include_archived:
        query = query.where(schedules.c.archived.is_(False))
    return [rows.schedule_from_row(r) for r in conn.execute(query).mappings()]


def list_due(conn: Connection, now: datetime) -> list[Schedule]:
    """Enabled, live schedules whose ``next_run_at <= now`` (one query on the partial index)."""
    return [rows.schedule_from_row(r) for r in conn.execute(due_query(now)).mappings()]


def due_query(now: datetime) -> Select[Any]:
    """Live schedules due at ``now``, in the form the partial index ``ix_schedules_due`` serves."""
    return (select(schedules).where(text(LIVE_SCHEDULE), schedules.c.next_run_at <= now)
            .order_by(schedules.c.next_run_at, schedules.c.id))


def insert_schedule(conn: Connection, spec: ScheduleSpec, *, next_run_at: datetime | None, now: datetime) -> int:
    """Create a schedule row; returns its id."""
    definition = rows.definition_of(spec)
    result = conn.execute(insert(schedules).values(
        name=spec.name, workflow=spec.workflow, project=spec.project, definition=definition,
        definition_hash=rows.definition_hash(definition), applied_definition=definition, version=1,
        enabled=spec.enabled, archived=False,
        disabled_by_cli=False, disabled_at=None if spec.enabled else now, next_run_at=next_run_at,
        created_at=now, updated_at=now,
    ))
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def update_schedule(conn: Connection, schedule: Schedule, *, now: datetime, spec: ScheduleSpec | None = None,
                    **state: Any) -> Schedule:
    """Write a new version of ``schedule`` if its version is still the one read (optimistic lock).

    Raises StaleVersion when another writer got there first; nothing changes then.
    """
    values: dict[str, Any] = dict(state)
    if spec is not None:
        definition = rows.definition_of(spec)
        values.update(definition=definition, definition_hash=rows.definition_hash(definition),
                      workflow=spec.workflow, project=spec.project)
    values.update(version=schedule.version + 1, updated_at=now)
    result = conn.execute(update(schedules)
                          .where(and_(schedules.c.id == schedule.id, schedules.c.version == schedule.version))
                          .values(**values))
    if result.rowcount != 1:
        raise errors.StaleVersion(
            f"schedule '{schedule.name}' changed since version {schedule.version} was read; reload and retry")
    if spec is not None and spec.priority != schedule.spec.priority:
        run_rows.follow_schedule_priority(conn, schedule.id, SCHEDULE_RANK[spec.priority])
    return get_schedule_by_id(conn, schedule.id)


def record_applied(conn: Connection, schedule_id: int, definition: dict[str, Any]) -> None:
    """Note ``definition`` as the last applied one without a new version (the file caught up with the database)."""
    conn.execute(update(schedules).where(schedules.c.id == schedule_id).values(applied_definition=definition))


_ADVANCE = (update(schedules)
            .where(schedules.c.id == bindparam("b_id"), schedules.c.next_run_at == bindparam("b_expected"))
            .values(next_run_at=bindparam("b_new")))


def advance_next_run_at(conn: Connection, schedule_id: int, expected: datetime, new: datetime) -> bool:
    """Compare-and-set ``next_run_at``; False means another scheduler already handled this tick."""
    result = fastsql.execute(conn, _ADVANCE, {"b_id": schedule_id, "b_expected": expected, "b_new": new})
    return bool(result.rowcount == 1)
