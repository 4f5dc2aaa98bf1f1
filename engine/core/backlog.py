"""What the runs that wait are waiting for, when a worker finds nothing to claim (``work``, ``cycle``). Pure.

``work --until-idle`` ends when nothing is claimable *now*; "nothing to do" would hide
1,900 backfill runs held back by ``backfill_concurrency`` or a queue of retries due
later. The store counts the waiting runs by what holds them (``store.backlog_rows``);
``describe`` says it in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from engine.core import concurrency_caps
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
    running: int = 0  # every run RUNNING (what ``[limits] max_running`` counts)
    running_of: Mapping[str, int] = field(default_factory=dict)  # RUNNING, by workflow (``[limits.workflows]``)
    due_of: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # by workflow: (other, backfill)


def _n(count: int) -> str:
    return f"{count:,}"


def describe(backlog: Backlog, *, backfill_limit: int,
             caps: concurrency_caps.Caps = concurrency_caps.Caps()) -> str | None:
    """One line naming what the waiting runs wait for, or None when no run waits at all.

    Runs due now that this worker did not take are named too: another worker holds
    the limits, or this one does not serve their project or workflow.
    """
    parts: list[str] = []
    claimable = backlog.other
    backfills_wait = backlog.backfill and backlog.running_backfills >= backfill_limit
    if backlog.backfill:
        if backfills_wait:
            parts.append(f"{_n(backlog.backfill)} backfill run(s) wait behind backfill_concurrency = {backfill_limit} "
                         f"({_n(backlog.running_backfills)} running)")
        else:
            claimable += backlog.backfill
    for workflow, (other, backfill) in sorted(backlog.due_of.items()):
        due = other + (0 if backfills_wait else backfill)
        full = caps.full(workflow, running=backlog.running, running_of=backlog.running_of) if due else None
        if full is not None:
            parts.append(f"{_n(due)} {workflow} run(s) wait for {full}")
            claimable -= due
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
