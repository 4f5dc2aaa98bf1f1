"""What the runs that wait are waiting for, when a worker finds nothing to claim (``work``, ``cycle``). Pure.

``work --until-idle`` ends when nothing is claimable *now*; "nothing to do" would hide
1,900 backfill runs held back by ``backfill_concurrency`` or a queue of retries due
later. The store counts the waiting runs by what holds them (``store.backlog_rows``);
``describe`` says it in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.core.clock import format_instant


@dataclass(frozen=True)
class Backlog:
    """The runs that have not started, by what they wait for (each run counted once, in this order)."""

    held: int = 0  # their schedule is disabled
    pending: int = 0  # PENDING: behind their schedule's run in flight (overlap)
    later: int = 0  # QUEUED or RETRY_PENDING with a not_before still ahead
    next_at: datetime | None = None  # the earliest of those not_before
    backfill: int = 0  # backfill-priority runs due now
    running_backfills: int = 0  # backfill-priority runs RUNNING (what backfill_concurrency counts)
    other: int = 0  # due now and not backfills


def _n(count: int) -> str:
    return f"{count:,}"


def describe(backlog: Backlog, *, backfill_limit: int) -> str | None:
    """One line naming what the waiting runs wait for, or None when no run waits at all.

    Runs due now that this worker did not take are named too: another worker holds
    the limits, or this one does not serve their project or workflow.
    """
    parts: list[str] = []
    claimable = backlog.other
    if backlog.backfill:
        if backlog.running_backfills >= backfill_limit:
            parts.append(f"{_n(backlog.backfill)} backfill run(s) wait behind backfill_concurrency = {backfill_limit} "
                         f"({_n(backlog.running_backfills)} running)")
        else:
            claimable += backlog.backfill
    if backlog.later:
        at = f" (the next at {format_instant(backlog.next_at)})" if backlog.next_at is not None else ""
        parts.append(f"{_n(backlog.later)} run(s) wait for their retry time{at}")
    if backlog.pending:
        parts.append(f"{_n(backlog.pending)} PENDING run(s) wait behind their schedule's run in flight")
    if backlog.held:
        parts.append(f"{_n(backlog.held)} run(s) held (schedule disabled)")
    if not parts and not claimable:
        return None
    parts.append(f"{_n(claimable)} claimable now" + (" (by another worker, or of a project or workflow this one "
                                                      "does not serve, or behind another revision of their period)"
                                                      if claimable else ""))
    return "; ".join(parts)
