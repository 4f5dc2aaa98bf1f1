"""A consistent copy of a live SQLite database (``reportflow db backup``, and the scheduled backups), and its check.

The copy is written to a partial file beside the destination (``.NAME.partial``), made
durable (fsync of the file, then of the folder after the rename) and renamed into place,
so the destination is either absent or complete. A partial file never outlives its try:
any exception or signal the process sees removes it, and the partials a ``kill -9`` left
(no live backup holds their lock) are removed by the next backup into that folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from engine.core import errors

PARTIAL = ".partial"
_SQLITE_HEADER = b"SQLite format 3\x00"


def partial_path(destination: Path) -> Path:
    """Where the copy of ``destination`` is written before the rename."""
    return destination.with_name(f".{destination.name}{PARTIAL}")


@dataclass(frozen=True)
class Copy:
    """A copy made: its pages, and the rows of each table of the source in the snapshot it was made from."""

    pages: int
    counts: dict[str, int]


def backup_sqlite(engine: Engine, destination: Path) -> int:
    """Copy a live SQLite database to ``destination`` (``take_copy``); returns the number of pages copied."""
    return take_copy(engine, destination).pages


def take_copy(engine: Engine, destination: Path) -> Copy:
    """Copy a live SQLite database to ``destination`` with sqlite3's online backup API.

    One backup step copies every page under one read transaction, so the copy
    is a consistent snapshot even while workers commit (WAL lets them go on); the
    source's row counts are read in that same transaction, for ``verify`` to compare.
    The copy is written beside ``destination``, fsynced and renamed into place;
    stale partial copies of earlier killed tries in that folder are removed first.
    """
    if engine.dialect.name != "sqlite":
        raise errors.InvalidInput(
            "db backup copies SQLite databases only; for PostgreSQL use "
            "`pg_dump -Fc -f reportflow.dump DBNAME` (restore with `pg_restore -d DBNAME reportflow.dump`)")
    if destination.exists():
        raise errors.InvalidInput(f"{destination} already exists; give a new path")
    if not destination.parent.is_dir():
        raise errors.InvalidInput(f"{destination.parent} is not a folder")
    remove_stale_partials(destination.parent)
    partial = partial_path(destination)
    try:  # around the lock too: a signal just after the partial file was created must remove it as well
        with _held(partial):
            made = _copy(engine, partial)
            _fsync(partial)
            partial.rename(destination)
    except BaseException:  # an error, Ctrl-C, SIGTERM (the CLI makes it SystemExit): no partial stays
        _discard(partial)
        raise
    _fsync(destination.parent)
    return made


def _copy(engine: Engine, partial: Path) -> Copy:
    raw = engine.raw_connection()
    try:
        source: Any = raw.driver_connection
        # A read transaction opened first: the backup step runs inside it (SQLite begins none of its own
        # when one is open), so the counts below and the pages copied are the same snapshot.
        source.execute("BEGIN DEFERRED")
        try:
            counts = row_counts(source)
            target = sqlite3.connect(partial)
            try:
                source.backup(target, pages=-1)
                pages = int(target.execute("PRAGMA page_count").fetchone()[0])
                target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            finally:
                target.close()
        finally:
            source.execute("ROLLBACK")
    finally:
        raw.close()
    return Copy(pages, counts)


def row_counts(conn: Any) -> dict[str, int]:
    """The rows of every table of a sqlite3 connection (its own tables, not SQLite's)."""
    names = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    return {name: int(conn.execute(f'SELECT count(*) FROM "{name.replace(chr(34), chr(34) * 2)}"').fetchone()[0])
            for name in names}


def digest(path: Path) -> tuple[int, str]:
    """A file's size and sha256, read in blocks (a database copy may be large)."""
    hasher, size = hashlib.sha256(), 0
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            hasher.update(block)
            size += len(block)
    return size, hasher.hexdigest()


def inspect(path: Path) -> tuple[list[str], dict[str, int]]:
    """Open a copy read-only (as a restore would read it): SQLite's integrity check's complaints, and its
    tables' row counts. A file SQLite cannot read at all is one complaint and no counts."""
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            verdict = [str(row[0]) for row in conn.execute("PRAGMA integrity_check(20)")]
            problems = [] if verdict == ["ok"] else [f"integrity check: {line}" for line in verdict]
            return problems, ({} if problems else row_counts(conn))
    except sqlite3.DatabaseError as exc:
        return [f"cannot be read: {exc}"], {}


@contextmanager
def _held(partial: Path) -> Iterator[None]:
    """Create ``partial`` and hold an flock on it while the copy runs: a live try is never taken for stale.

    SQLite's own locks are POSIX record locks, which do not meet ``flock`` on Linux.
    """
    fd = os.open(partial, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise errors.Conflict(f"another backup is writing {partial.name}; let it finish") from None
        os.ftruncate(fd, 0)
        yield
    finally:
        os.close(fd)


def remove_stale_partials(folder: Path) -> list[Path]:
    """Remove the partial copies in ``folder`` that no live backup holds (a ``kill -9`` left them).

    Only ``.NAME.partial`` files that are empty, start with SQLite's header or with zeros (a copy whose
    first page was not written yet) are touched
    (with their ``-journal``); a partial whose writer is alive holds its lock and is left.
    """
    removed = []
    for candidate in folder.glob(f".*{PARTIAL}"):
        if candidate.is_symlink() or not candidate.is_file():
            continue
        try:
            fd = os.open(candidate, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            head = os.read(fd, len(_SQLITE_HEADER))
            # SQLite's online backup may write the first page last: a copy killed midway can start with zeros.
            if head not in (b"", _SQLITE_HEADER) and head.strip(b"\x00"):
                continue  # not a copy of ours
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a backup is writing it now
            _discard(candidate)
            removed.append(candidate)
        finally:
            os.close(fd)
    return removed


def _discard(partial: Path) -> None:
    for leftover in (partial, partial.with_name(partial.name + "-journal")):
        leftover.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
