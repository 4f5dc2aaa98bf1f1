"""Scheduled, verified SQLite backups (``[store] backup``): what ``serve`` and ``cycle`` do when a slot comes.

A pass (``take_due``): decide the due slot (``core.backups.decide_due``), claim it in the database
(one process per slot, however many run), copy the database online, then verify the copy: SQLite's
integrity check and every table's row count against the source's in the snapshot the copy was made
from, on a read-only open of the file, as a restore would open it. A verified copy is recorded, then the
verified copies past the newest ``keep`` are deleted. Any failure is recorded with ``backup_failed``
in the same transaction, deletes the failed copy and nothing else: a good backup is never removed
because a later one failed.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy.engine import Engine

from engine.core import backups, errors, logs
from engine.core.clock import format_instant
from engine.runtime import Runtime
from engine.store import backup, backup_rows, database

log = logging.getLogger(__name__)
#: ``serve`` looks again at least this often, so a changed ``[store] backup`` is followed within a minute.
MAX_WAIT = timedelta(minutes=1)

Copier = Callable[[Engine, Path], backup.Copy]


@dataclass(frozen=True)
class BackupOutcome:
    """What a pass did: the slot it took (None: none due, or another process took it), and how it ended."""

    slot_at: datetime | None
    next_at: datetime
    path: Path | None = None
    problems: tuple[str, ...] = ()
    removed: tuple[Path, ...] = ()

    @property
    def verified(self) -> bool:
        """A copy was taken and passed every check."""
        return self.slot_at is not None and not self.problems


def file_name(slot_at: datetime) -> str:
    """A slot's copy, named so that names sort as the slots do."""
    return f"reportflow-{slot_at:%Y%m%dT%H%M%SZ}.db"


def take_due(rt: Runtime, *, copy: Copier = backup.take_copy) -> BackupOutcome | None:
    """Take, verify and record the backup of the due slot, if any and if this process claims it.

    None when no scheduled backup applies (none configured, or the store is not SQLite). ``copy`` makes the
    copy (``store.backup.take_copy``; tests pass one that damages it). Database errors propagate.
    """
    plan = rt.config.backup
    if plan is None or plan.cron is None or rt.store.dialect != "sqlite":
        return None
    now = rt.clock.now()
    with rt.store.read() as conn:
        last = backup_rows.last_claimed(conn)
    due = backups.decide_due(plan.cron, plan.timezone, now, last)
    if due.slot_at is None:
        return BackupOutcome(None, due.next_at)
    path = plan.dir / file_name(due.slot_at)
    with rt.store.write() as conn:
        if not backup_rows.claim(conn, slot_at=due.slot_at, path=path, cron=plan.cron, next_slot_at=due.next_at,
                                 now=now, owner=f"{socket.gethostname()}:{os.getpid()}"):
            return BackupOutcome(None, due.next_at)  # another process has this slot
    problems = _copy_and_verify(rt, path, copy)
    finished = rt.clock.now()
    if problems:
        with rt.store.write() as conn:
            backup_rows.record_failed(conn, due.slot_at, finished, "; ".join(problems))
        logs.event(log, logging.ERROR, "backup_failed", slot=format_instant(due.slot_at), problem=problems[0])
        return BackupOutcome(due.slot_at, due.next_at, path, tuple(problems))
    size, digest = backup.digest(path)
    with rt.store.write() as conn:
        backup_rows.record_verified(conn, due.slot_at, finished, f"verified {path.name}", size=size, sha256=digest)
        kept = backup_rows.list_verified(conn)
    removed = _remove_old(rt, kept, plan.keep)
    logs.event(log, logging.INFO, "backup_verified", slot=format_instant(due.slot_at), path=str(path),
               removed=len(removed))
    return BackupOutcome(due.slot_at, due.next_at, path, (), tuple(removed))


def _copy_and_verify(rt: Runtime, path: Path, copy: Copier) -> list[str]:
    """The copy's problems (none: verified). A copy that fails is deleted; a file that was there before is not."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        made = copy(rt.store.engine, path)
    except (OSError, sqlite3.Error, errors.ReportflowError) as exc:
        return [f"the copy to {path} failed: {exc}"]
    problems, counts = backup.inspect(path)
    problems = problems or backups.mismatches(made.counts, counts)
    if problems:
        path.unlink(missing_ok=True)  # not a backup anyone may restore
    return problems


def _remove_old(rt: Runtime, kept: list[backup_rows.BackupRow], keep: int) -> list[Path]:
    """Delete the verified copies past the newest ``keep``, then record them removed."""
    going = set(backups.decide_removals([row.slot_at for row in kept], keep))
    removed = [row for row in kept if row.slot_at in going]
    for row in removed:
        row.path.unlink(missing_ok=True)
    if removed:
        with rt.store.write() as conn:
            backup_rows.mark_removed(conn, [row.slot_at for row in removed])
    return [row.path for row in removed]


def backup_until(rt: Runtime, stop: threading.Event) -> None:
    """``serve``'s backup loop: a pass whenever a slot comes, until ``stop``; never raises.

    A database error or a bug is logged and the loop goes on: it is retried at the next look, and a copy
    that went wrong was already recorded as ``backup_failed``.
    """
    while not stop.is_set():
        wait = MAX_WAIT
        try:
            outcome = take_due(rt)
            if outcome is None:
                wait = MAX_WAIT
            else:
                wait = min(max(outcome.next_at - rt.clock.now(), timedelta(seconds=1)), MAX_WAIT)
        except database.DATABASE_ERRORS:
            logs.event(log, logging.ERROR, "backup_pass_failed", exc_info=True)
        except Exception:  # noqa: BLE001 - see the docstring
            logs.event(log, logging.ERROR, "backup_pass_crashed", exc_info=True)
        rt.clock.wait(wait.total_seconds(), stop)
