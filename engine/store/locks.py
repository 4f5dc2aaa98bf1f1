"""PostgreSQL advisory locks: their keys, named once so that no two locks share one by accident,
and the transaction-scoped locks that serialise claims and a schedule's runs.

SQLite needs none of them: its write lock (``BEGIN IMMEDIATE``) serialises claims and ticks,
and a file beside the database serialises migrations and ``Store.exclusive``.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import text
from sqlalchemy.engine import Connection

MIGRATION = 7312001  # one `db upgrade` (or auto-migration) at a time
CLAIM = 7312002  # claims, one at a time: exact limits (one RUNNING per base key, backfill concurrency)
SCHEDULE_SPACE = 7312003  # with a schedule's id: the promotion of its next PENDING run
DEPENDENCY_SPACE = 7312023  # with 0: the decisions about runs that wait for an upstream schedule (SPEC §18)
FAMILY_SPACE = 7312017  # with a parent's id: the decisions about its child runs (release, retry, cancel)


def named(name: str) -> int:
    """The 64-bit key of a named mutex (``Store.exclusive``): a digest, so any name fits."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


_LOCK_CLAIMS = text("SELECT pg_advisory_xact_lock(:key)")
_LOCK_SCHEDULE = text("SELECT pg_advisory_xact_lock(:space, :schedule)")


def serialise_with_claims(conn: Connection) -> None:
    """Make this transaction wait for claims in flight, and claims wait for it (PostgreSQL's claim lock).

    Every claim takes it (exact limits); a kill switch takes it so that no claim which read
    the schedule as enabled commits after it. SQLite's write transactions are serialised already.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(_LOCK_CLAIMS, {"key": CLAIM})


def lock_schedule_runs(conn: Connection, schedule_id: int) -> None:
    """Serialise the tick and finishing workers on one schedule's runs (PostgreSQL; SQLite is serial).

    An advisory lock, not ``SELECT ... FOR UPDATE`` on the schedule row: two
    transactions that both hold a key-share lock on that row (foreign-key
    checks) and then ask for FOR UPDATE deadlock on the upgrade.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(_LOCK_SCHEDULE, {"space": SCHEDULE_SPACE, "schedule": schedule_id % 2**31})
