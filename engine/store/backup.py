"""A consistent copy of a live SQLite database (``reportflow db backup``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from engine.core import errors


def backup_sqlite(engine: Engine, destination: Path) -> int:
    """Copy a live SQLite database to ``destination`` with sqlite3's online backup API.

    One backup step copies every page under one read transaction, so the copy
    is a consistent snapshot even while workers commit (WAL lets them go on).
    The copy is written beside ``destination`` and renamed into place.
    Returns the number of pages copied.
    """
    if engine.dialect.name != "sqlite":
        raise errors.InvalidInput(
            "db backup copies SQLite databases only; for PostgreSQL use "
            "`pg_dump -Fc -f reportflow.dump DBNAME` (restore with `pg_restore -d DBNAME reportflow.dump`)")
    if destination.exists():
        raise errors.InvalidInput(f"{destination} already exists; give a new path")
    if not destination.parent.is_dir():
        raise errors.InvalidInput(f"{destination.parent} is not a folder")
    partial = destination.with_name(f".{destination.name}.partial")
    partial.unlink(missing_ok=True)
    raw = engine.raw_connection()
    try:
        source: Any = raw.driver_connection
        target = sqlite3.connect(partial)
        try:
            source.backup(target, pages=-1)
            pages = int(target.execute("PRAGMA page_count").fetchone()[0])
            target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            target.close()
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        raw.close()
    partial.rename(destination)
    return pages
