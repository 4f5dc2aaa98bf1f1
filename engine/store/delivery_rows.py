"""The SQL of the deliveries ledger: one row per report key and target, written before and after each send.

``begin`` reads the row under a lock (``FOR UPDATE`` on PostgreSQL; SQLite's write lock serialises
writers anyway), asks ``deliveries.decide_send`` and writes what it decided, all in the caller's
write transaction, which commits before anything is sent. ``finish`` records a send's outcome only
while the row is still that send's ``SENDING`` attempt (the attempt number is the fence). The read
side lists a run's rows (``for_keys``) and the unconfirmed ones (``unconfirmed``); ``resend`` makes
rows an operator has looked at ``PENDING`` again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection, RowMapping

from engine.core import deliveries, redact
from engine.core.clock import Clock
from engine.core.deliveries import Delivery, DeliveryState, MessageKind, SendOutcome, SendPlan
from engine.store.handle import Store
from engine.store.run_rows import dialect_insert
from engine.store.tables import deliveries_sent as table

#: Longest error text kept on a row (a short reason; never a URL: masked before it is stored).
ERROR_CHARS = 500


def _from_row(row: RowMapping) -> Delivery:
    return Delivery(key=row["key"], target=row["target"], state=DeliveryState(row["state"]),
                    kind=MessageKind(row["kind"]), digest=row["digest"], sent_digest=row["sent_digest"],
                    run_id=row["run_id"], attempts=int(row["attempts"]), error=row["error"],
                    updated_at=row["updated_at"], sent_at=row["sent_at"])


def _values(row: Delivery) -> dict[str, object]:
    return {"state": row.state.value, "kind": row.kind.value, "digest": row.digest, "sent_digest": row.sent_digest,
            "run_id": row.run_id, "attempts": row.attempts,
            "error": redact.mask_urls(row.error)[:ERROR_CHARS] if row.error else None,
            "updated_at": row.updated_at, "sent_at": row.sent_at}


def get(conn: Connection, key: str, target: str, *, lock: bool = False) -> Delivery | None:
    """The row of (``key``, ``target``), or None; ``lock``: read it ``FOR UPDATE`` (PostgreSQL)."""
    query = select(table).where(table.c.key == key, table.c.target == target)
    found = conn.execute(query.with_for_update() if lock else query).mappings().first()
    return None if found is None else _from_row(found)


def begin(conn: Connection, key: str, target: str, digest: str, run_id: int | None, now: datetime) -> SendPlan:
    """Decide whether to send ``digest`` to ``target`` and write the decision (a SENDING row before a send).

    Run inside a write transaction that commits before the send. Two runs deciding at once for one
    key meet at the unique (key, target) index: the second waits for the first's lock and reads its row.
    """
    conn.execute(dialect_insert(conn)(table).values(
        key=key, target=target, state=DeliveryState.PENDING.value, kind=MessageKind.REPORT.value, digest="",
        attempts=0, updated_at=now).on_conflict_do_nothing(index_elements=["key", "target"]))
    row = get(conn, key, target, lock=True)
    assert row is not None  # inserted above, or there already
    # A row just made here is "never tried": PENDING with no digest and no attempt.
    fresh = row.state is DeliveryState.PENDING and row.attempts == 0 and not row.digest
    plan = deliveries.decide_send(None if fresh else row, key=key, target=target, digest=digest, run_id=run_id,
                                  now=now)
    if plan.row is not None:
        conn.execute(update(table).where(table.c.key == key, table.c.target == target).values(**_values(plan.row)))
    return plan


def finish(conn: Connection, key: str, target: str, attempt: int, outcome: SendOutcome, now: datetime) -> bool:
    """Record how send ``attempt`` ended; False (nothing written) when the row is no longer that SENDING attempt."""
    row = get(conn, key, target, lock=True)
    if row is None or row.state is not DeliveryState.SENDING or row.attempts != attempt:
        return False
    settled = deliveries.settle(row, outcome, now)
    done = conn.execute(update(table).where(
        table.c.key == key, table.c.target == target, table.c.state == DeliveryState.SENDING.value,
        table.c.attempts == attempt).values(**_values(settled)))
    return bool(done.rowcount)


def for_keys(conn: Connection, keys: Sequence[str]) -> list[Delivery]:
    """The rows of these report keys, by key then target."""
    if not keys:
        return []
    query = select(table).where(table.c.key.in_(list(keys))).order_by(table.c.key, table.c.target)
    return [_from_row(r) for r in conn.execute(query).mappings()]


def unconfirmed(conn: Connection, *, limit: int = 50) -> list[Delivery]:
    """Rows a person must look at (UNCONFIRMED), newest first."""
    query = (select(table).where(table.c.state == DeliveryState.UNCONFIRMED.value)
             .order_by(table.c.updated_at.desc(), table.c.id.desc()).limit(limit))
    return [_from_row(r) for r in conn.execute(query).mappings()]


def resend(conn: Connection, key: str, targets: Sequence[str] | None, now: datetime) -> list[Delivery]:
    """Make ``key``'s UNCONFIRMED and FAILED rows (of ``targets``, or all) PENDING: sent again by the next
    DELIVER. Returns the rows changed, as they were."""
    query = select(table).where(table.c.key == key,
                                table.c.state.in_([s.value for s in deliveries.RESENDABLE]))
    if targets is not None:
        query = query.where(table.c.target.in_(list(targets)))
    rows = [_from_row(r) for r in conn.execute(query.with_for_update()).mappings()]
    for row in rows:
        conn.execute(update(table).where(table.c.key == key, table.c.target == row.target,
                                         table.c.state == row.state.value)
                     .values(state=DeliveryState.PENDING.value, updated_at=now))
    return rows


class StoreDeliveries:
    """The engine's ``DeliveryBook`` (``engine.core.deliveries``): each call one short write transaction."""

    def __init__(self, store: Store, clock: Clock, run_id: int) -> None:
        self.store, self.clock, self.run_id = store, clock, run_id

    def begin(self, key: str, target: str, digest: str) -> SendPlan:
        """``begin`` in its own write transaction, committed before the caller sends."""
        with self.store.write() as conn:
            return begin(conn, key, target, digest, self.run_id, self.clock.now())

    def finish(self, key: str, target: str, attempt: int, outcome: SendOutcome) -> bool:
        """``finish`` in its own write transaction."""
        with self.store.write() as conn:
            return finish(conn, key, target, attempt, outcome, self.clock.now())
