"""Rate limits shared by every process on the store: one row per limit in ``rate_limits``.

A row holds the next free slot (``next_at``) of a named limit. Reserving a
slot is one short write transaction: the row is locked (``BEGIN IMMEDIATE``
on SQLite, ``SELECT ... FOR UPDATE`` on PostgreSQL), the slot decided by
``engine.core.pacing.decide_slot``, the row moved on, and the transaction
committed. Nobody waits while holding the lock: the caller sleeps until the
slot afterwards.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from engine.core import pacing
from engine.store.run_rows import dialect_insert
from engine.store.tables import rate_limits


def reserve_rate_slot(conn: Connection, name: str, interval: timedelta, now: datetime) -> datetime:
    """Reserve the next slot of limit ``name`` and return it (an instant >= ``now``, usually).

    Run inside a write transaction (``Store.write()``); the reservation is
    durable when it commits. Slots of one limit are at least ``interval``
    apart across every process on the store (see ``pacing.decide_slot`` for
    the skew guard).
    """
    conn.execute(dialect_insert(conn)(rate_limits).values(name=name, next_at=now)
                 .on_conflict_do_nothing(index_elements=["name"]))
    next_at = conn.execute(select(rate_limits.c.next_at).where(rate_limits.c.name == name)
                           .with_for_update()).scalar_one()
    decision = pacing.decide_slot(next_at, now, interval)
    conn.execute(update(rate_limits).where(rate_limits.c.name == name).values(next_at=decision.next_at))
    return decision.slot_at
