"""What ``work`` and ``cycle`` say when they stop: the runs that wait, and what they wait for (``core.backlog``)."""

from __future__ import annotations

from engine.core import backlog
from engine.runtime import Runtime
from engine.store import backlog_rows


def what_waits(rt: Runtime) -> str | None:
    """One line naming what the runs not started wait for at ``rt.clock.now()``, or None when none waits."""
    with rt.store.read() as conn:
        found = backlog_rows.count_backlog(conn, rt.clock.now())
    return backlog.describe(found, backfill_limit=rt.config.worker.backfill_concurrency,
                            caps=rt.config.limits.caps())
