"""The SQL of scheduled backups (``[store] backup``): claim a slot, record its verdict, list and retire copies.

A slot is claimed by inserting its row (the slot is the primary key, insert-or-nothing), in a
transaction of its own and before anything is copied: of two ``serve``/``cycle`` processes that
find the same slot due, exactly one inserts it and takes the backup; the other does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection

from engine.core import alerts
from engine.core.backup_slots import BackupStatus
from engine.core.clock import format_instant
from engine.core.schedule_spec import Criticality
from engine.store import outbox
from engine.store.run_rows import dialect_insert
from engine.store.tables import backups_taken

EVENT = alerts.AlertEvent.BACKUP_FAILED


@dataclass(frozen=True)
class BackupRow:
    slot_at: datetime
    status: BackupStatus
    path: Path
    finished_at: datetime | None
    detail: str | None
    size: int | None = None  # as verified (None: verified before sizes were recorded)
    sha256: str | None = None


def last_claimed(conn: Connection) -> datetime | None:
    """The latest slot any process claimed (None: no backup was ever started)."""
    found: datetime | None = conn.execute(select(func.max(backups_taken.c.slot_at))).scalar()
    return found


def claim(conn: Connection, *, slot_at: datetime, path: Path, cron: str, next_slot_at: datetime,
          now: datetime, owner: str) -> bool:
    """Insert the slot's row unless a process did already; whether this call claimed it."""
    stmt = dialect_insert(conn)(backups_taken).values(
        slot_at=slot_at, status=BackupStatus.TAKING.value, path=str(path), cron=cron, next_slot_at=next_slot_at,
        claimed_at=now, claimed_by=owner)
    return bool(conn.execute(stmt.on_conflict_do_nothing(index_elements=["slot_at"])).rowcount)


def record_verified(conn: Connection, slot_at: datetime, now: datetime, detail: str, *, size: int,
                    sha256: str) -> None:
    """The slot's copy passed every check; its size and sha256 are kept, to tell later that it is still it."""
    _finish(conn, slot_at, BackupStatus.VERIFIED, now, detail)
    conn.execute(update(backups_taken).where(backups_taken.c.slot_at == slot_at).values(size=size, sha256=sha256))


def record_failed(conn: Connection, slot_at: datetime, now: datetime, problem: str) -> None:
    """The slot's copy failed (or could not be made): the row says why, and ``backup_failed`` is raised in
    this same transaction (once per slot), so the alert commits with the record of its cause."""
    _finish(conn, slot_at, BackupStatus.FAILED, now, problem)
    outbox.record_event(conn, event=EVENT, dedupe_key=f"{EVENT}/{format_instant(slot_at)}", at=now,
                        summary=f"the backup of {format_instant(slot_at)} failed: {problem}",
                        decision=alerts.decide_severity(EVENT, Criticality.NORMAL, 1),
                        details={"slot": format_instant(slot_at)})


def _finish(conn: Connection, slot_at: datetime, status: BackupStatus, now: datetime, detail: str) -> None:
    conn.execute(update(backups_taken).where(backups_taken.c.slot_at == slot_at)
                 .values(status=status.value, finished_at=now, detail=detail[:2000]))


def list_verified(conn: Connection) -> list[BackupRow]:
    """The verified backups still kept, newest slot first."""
    rows = conn.execute(select(backups_taken).where(backups_taken.c.status == BackupStatus.VERIFIED.value)
                        .order_by(backups_taken.c.slot_at.desc())).mappings()
    return [BackupRow(slot_at=r["slot_at"], status=BackupStatus(r["status"]), path=Path(r["path"]),
                      finished_at=r["finished_at"], detail=r["detail"], size=r["size"], sha256=r["sha256"])
            for r in rows]


def mark_removed(conn: Connection, slots: list[datetime]) -> None:
    """These verified backups were deleted to keep ``keep``."""
    if slots:
        conn.execute(update(backups_taken).where(backups_taken.c.slot_at.in_(slots),
                                                 backups_taken.c.status == BackupStatus.VERIFIED.value)
                     .values(status=BackupStatus.REMOVED.value))
