"""Stuck runs (SPEC §15.1 ``run_stuck``): which waiting runs are stuck, and why. Pure.

A run ``PENDING``, ``QUEUED`` or ``RETRY_PENDING`` (past its ``not_before``) that no
worker has claimed for ``[notify] stuck_after``. A queue that is moving is not stuck:
a claimable run whose project had a run claimed within ``stuck_after`` waits its turn.
The reason, when one is known: the schedule is disabled, the run waits behind another
(overlap), no live worker serves its project (the workers' heartbeats), or a concurrency
cap is full (``[limits]``, SPEC §18).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.core.models import HELD_BY_DISABLED, HOLDABLE_STATUSES

WAITING = tuple(sorted(s.value for s in HOLDABLE_STATUSES))
# A worker beats every 10 s; one not seen for this long is taken for dead.
LIVE_WINDOW = timedelta(seconds=90)


@dataclass(frozen=True)
class Waiting:
    """The facts about one waiting run that the decision needs."""

    run_id: int
    key: str
    status: str
    project: str
    workflow: str
    schedule: str | None
    schedule_enabled: bool
    created_at: datetime
    not_before: datetime | None
    claimed_at: datetime | None
    blocker: int | None  # for a PENDING run: the run of its schedule in flight


@dataclass(frozen=True)
class StuckRun:
    run_id: int
    key: str
    status: str
    schedule: str | None
    waiting_since: datetime
    reason: str | None  # None: not known


def waiting_since(run: Waiting) -> datetime:
    """Since when the run could have been claimed: the latest of its creation, ``not_before`` and last claim."""
    return max(t for t in (run.created_at, run.not_before, run.claimed_at) if t is not None)


def live_projects(beats: Sequence[tuple[datetime, Sequence[str] | None]], now: datetime,
                  window: timedelta = LIVE_WINDOW) -> set[str] | None:
    """The projects live workers serve; None when a live worker serves every project."""
    served: set[str] = set()
    for last_seen_at, projects in beats:
        if now - last_seen_at > window:
            continue
        if projects is None:
            return None
        served.update(projects)
    return served


def decide_stuck(run: Waiting, *, now: datetime, stuck_after: timedelta, served: set[str] | None,
                 last_claim_in_project: datetime | None, cap: str | None = None) -> StuckRun | None:
    """The run as a StuckRun with its reason, or None when it is not stuck at ``now``.

    ``cap``: the concurrency cap that is full for the run's workflow now (``Caps.full``), or None.
    """
    since = waiting_since(run)
    if now - since < stuck_after:
        return None
    if run.status != "PENDING" and run.schedule_enabled and last_claim_in_project is not None \
            and now - last_claim_in_project < stuck_after and (served is None or run.project in served):
        return None  # the project's queue is moving: this run waits its turn
    reason: str | None = None
    if not run.schedule_enabled:
        reason = HELD_BY_DISABLED
    elif run.status == "PENDING" and run.blocker is not None:
        reason = f"waits behind run {run.blocker}"
    elif served is not None and run.project not in served:
        reason = f"no live worker serves project {run.project}"
    elif run.status != "PENDING" and cap is not None:
        reason = f"waits for {cap}"
    return StuckRun(run.run_id, run.key, run.status, run.schedule, since, reason)
