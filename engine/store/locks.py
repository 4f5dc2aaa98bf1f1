"""PostgreSQL advisory-lock keys, named once so that no two locks share one by accident.

SQLite needs none of them: its write lock (``BEGIN IMMEDIATE``) serialises claims and ticks,
and a file beside the database serialises migrations and ``Store.exclusive``.
"""

from __future__ import annotations

import hashlib

MIGRATION = 7312001  # one `db upgrade` (or auto-migration) at a time
CLAIM = 7312002  # claims, one at a time: exact limits (one RUNNING per base key, backfill concurrency)
SCHEDULE_SPACE = 7312003  # with a schedule's id: the promotion of its next PENDING run
FAMILY_SPACE = 7312017  # with a parent's id: the decisions about its child runs (release, retry, cancel)


def named(name: str) -> int:
    """The 64-bit key of a named mutex (``Store.exclusive``): a digest, so any name fits."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
