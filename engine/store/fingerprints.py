"""Rows of ``config_fingerprints``: the configurations a full ``tick`` validated (engine.cli.fast_tick).

Both functions work on a bare table clause, not ``engine.store.tables``: the
fast path reads with ``files_of`` and must not pay for the table definitions,
and ``record`` then loads nothing of the engine that the recorded list of
source files could miss.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import String, Text, column, delete, select, table
from sqlalchemy.engine import Connection

from engine.store.types import UTCDateTime

# tests/unit/test_fast_tick.py holds these columns to engine.store.tables' (which the migrations build).
CONFIG_FINGERPRINTS = table("config_fingerprints", column("fingerprint", String(64)), column("files", Text()),
                            column("recorded_at", UTCDateTime()))


def files_of(conn: Connection, fingerprint: str) -> str | None:
    """The ``files`` recorded with ``fingerprint``, or None if it was never validated (or was pruned)."""
    t = CONFIG_FINGERPRINTS
    return conn.execute(select(t.c.files).where(t.c.fingerprint == fingerprint)).scalar()


def record(conn: Connection, fingerprint: str, files: str, now: datetime, *, keep: int) -> None:
    """Insert or refresh ``fingerprint``, then drop all but the ``keep`` most recently recorded.

    ON CONFLICT makes two processes recording the same fingerprint at once harmless.
    """
    t = CONFIG_FINGERPRINTS
    insert: Any
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    upsert = insert(t).values(fingerprint=fingerprint, files=files, recorded_at=now)
    conn.execute(upsert.on_conflict_do_update(index_elements=[t.c.fingerprint],
                                              set_={"files": upsert.excluded.files,
                                                    "recorded_at": upsert.excluded.recorded_at}))
    newest = select(t.c.fingerprint).order_by(t.c.recorded_at.desc(), t.c.fingerprint).limit(keep)
    conn.execute(delete(t).where(t.c.fingerprint.not_in(newest)))
