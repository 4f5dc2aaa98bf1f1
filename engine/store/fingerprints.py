"""Rows of ``config_fingerprints``: the configurations a full ``tick`` validated (engine.fast_tick).

``files_of`` is on the fast path and runs on a bare table clause (no
``engine.store.tables``); ``record`` runs on the full path, which has the
tables loaded already.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String, Text, column, delete, select, table
from sqlalchemy.engine import Connection

# The table as the fast path reads it; tests/unit/test_fast_tick.py holds it to engine.store.tables'.
CONFIG_FINGERPRINTS = table("config_fingerprints", column("fingerprint", String(64)), column("files", Text()))


def files_of(conn: Connection, fingerprint: str) -> str | None:
    """The ``files`` recorded with ``fingerprint``, or None if it was never validated (or pruned)."""
    t = CONFIG_FINGERPRINTS
    return conn.execute(select(t.c.files).where(t.c.fingerprint == fingerprint)).scalar()


def record(conn: Connection, fingerprint: str, files: str, now: datetime, *, keep: int) -> None:
    """Insert or refresh ``fingerprint``, then drop all but the ``keep`` most recently recorded.

    ON CONFLICT makes two processes recording the same fingerprint at once harmless.
    """
    from engine.store.runs import dialect_insert
    from engine.store.tables import config_fingerprints as t

    insert = dialect_insert(conn)(t).values(fingerprint=fingerprint, files=files, recorded_at=now)
    conn.execute(insert.on_conflict_do_update(index_elements=[t.c.fingerprint],
                                              set_={"files": insert.excluded.files,
                                                    "recorded_at": insert.excluded.recorded_at}))
    newest = select(t.c.fingerprint).order_by(t.c.recorded_at.desc(), t.c.fingerprint).limit(keep)
    conn.execute(delete(t).where(t.c.fingerprint.not_in(newest)))
