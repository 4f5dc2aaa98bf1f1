"""SQL of child runs (SPEC §17): creating a parent's children, releasing a WAITING parent, reading families.

A parent's children are created insert-or-nothing on their unique keys
(``{parent key}/{name}``) in the parent's boundary transaction, so a fan-out
step that runs again after a crash creates none twice. A WAITING parent holds
no lease and nothing polls it: the transaction that finishes its last child
queues it again (``release_parent``), under a per-parent lock on PostgreSQL so
two children finishing at once cannot both see the other one still working.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlalchemy import exists, select, text, update
from sqlalchemy.engine import Connection

from engine.core import transitions
from engine.core.models import UNFINISHED_STATUSES, AttemptTrigger, NewRun, Run, RunStatus, StepStatus
from engine.store import locks, rows, run_rows
from engine.store.tables import runs, steps

# A child counts as finished in its terminal statuses; RETRY_PENDING and MANUAL_REQUIRED still work.
UNFINISHED = sorted(s.value for s in UNFINISHED_STATUSES)
_child = runs.alias("child")


def lock_family(conn: Connection, parent_id: int) -> None:
    """Serialise the decisions about one parent's children (PostgreSQL; SQLite writers are serial)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:space, :parent)"),
                     {"space": locks.FAMILY_SPACE, "parent": parent_id % 2**31})


def insert_children(conn: Connection, children: Sequence[NewRun]) -> dict[str, int]:
    """Insert child rows that do not exist yet (ON CONFLICT DO NOTHING); returns {key: id} of those inserted."""
    return run_rows.insert_runs(conn, children)


def unfinished_children(conn: Connection, parent_id: int) -> int:
    """How many of a parent's child runs have not finished."""
    query = select(runs.c.id).where(runs.c.parent_id == parent_id, runs.c.status.in_(UNFINISHED))
    return len(conn.execute(query).all())


def release_parent(conn: Connection, parent_id: int) -> bool:
    """Queue a WAITING parent once none of its children is unfinished; whether it was queued now.

    Called by every transaction that finishes a child (and by the reconciler as a safety net).
    """
    lock_family(conn, parent_id)
    transitions.transition(RunStatus.WAITING, RunStatus.QUEUED)
    busy = exists().where(_child.c.parent_id == runs.c.id, _child.c.status.in_(UNFINISHED))
    result = conn.execute(update(runs).where(runs.c.id == parent_id, runs.c.status == RunStatus.WAITING.value,
                                             runs.c.upstream_until.is_(None), ~busy)
                          .values(status=RunStatus.QUEUED.value, next_attempt_trigger=AttemptTrigger.FAN_IN.value,
                                  not_before=None))
    return result.rowcount == 1


def children_of(conn: Connection, parent_id: int, *, with_outputs: bool = False) -> list[Run]:
    """A parent's children in creation order; ``with_outputs`` loads their steps too."""
    found = [rows.run_from_row(r) for r in conn.execute(
        run_rows._run_query().where(runs.c.parent_id == parent_id).order_by(runs.c.id)).mappings()]
    if not with_outputs or not found:
        return found
    by_run: dict[int, list[Any]] = {}
    query = select(steps).where(steps.c.run_id.in_([r.id for r in found])).order_by(steps.c.run_id, steps.c.position)
    for row in conn.execute(query).mappings():
        by_run.setdefault(row["run_id"], []).append(rows.step_from_row(row))
    return [dataclasses.replace(r, steps=tuple(by_run.get(r.id, ()))) for r in found]


def waiting_ready(conn: Connection) -> list[int]:
    """WAITING parents none of whose children is unfinished (the reconciler's safety net)."""
    busy = exists().where(_child.c.parent_id == runs.c.id, _child.c.status.in_(UNFINISHED))
    query = select(runs.c.id).where(runs.c.status == RunStatus.WAITING.value, runs.c.upstream_until.is_(None),
                                    ~busy).order_by(runs.c.id)  # a run waiting for its upstream is not a parent
    return [int(i) for i in conn.execute(query).scalars()]


def orphans(conn: Connection) -> list[Run]:
    """Children whose parent row is gone (removed by hand: prune takes families together)."""
    parent = runs.alias("parent")
    query = run_rows._run_query().where(runs.c.parent_id.is_not(None),
                                        ~exists().where(parent.c.id == runs.c.parent_id))
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


def reset_steps_from(conn: Connection, run_id: int, position: int) -> None:
    """Steps from ``position`` on become PENDING again (the fan-in of a retried family)."""
    conn.execute(update(steps).where(steps.c.run_id == run_id, steps.c.position >= position).values(
        status=StepStatus.PENDING.value, error_code=None, error_message=None))
