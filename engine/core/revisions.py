"""What ``trigger`` and ``backfill`` do with a business period that may have rows (SPEC §12).

One pure decider for both commands: it looks at the period's **latest revision**
only, so once ``trigger --force-new`` made r2, a backfill never re-queues r1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from engine.core.models import ACTIVE_STATUSES, UNRUN_STATUSES, Run, RunStatus


class Command(StrEnum):
    TRIGGER = "trigger"
    BACKFILL = "backfill"


class PeriodAction(StrEnum):
    CREATE = "create"  # no row yet: a new revision-1 run
    REVISION = "revision"  # trigger --force-new: a new revision after the latest
    REQUEUE = "requeue"  # the latest row is queued again
    APPROVE = "approve"  # a MANUAL_REQUIRED row is approved (trigger only)
    LEAVE = "leave"  # listed, not touched (backfill of FAILED, PARTIAL_SUCCESS, MANUAL_REQUIRED)
    PRESENT = "present"  # active or SUCCESS: nothing to do


REQUEUE_ON_BACKFILL = UNRUN_STATUSES
REQUEUE_ON_TRIGGER = REQUEUE_ON_BACKFILL | {RunStatus.FAILED, RunStatus.PARTIAL_SUCCESS}


@dataclass(frozen=True)
class PeriodDecision:
    action: PeriodAction
    run: Run | None  # the latest revision the action applies to (None for CREATE)


def latest_revision(existing: Sequence[Run]) -> Run | None:
    """The period's row with the highest revision, or None when it has none."""
    return max(existing, key=lambda run: run.revision, default=None)


def decide_action(command: Command, status: RunStatus | None, *, force_new: bool = False) -> PeriodAction:
    """The §12 table: what ``command`` does with a period whose latest revision has ``status``."""
    if status is None:
        return PeriodAction.CREATE
    if force_new and command is Command.TRIGGER:
        return PeriodAction.REVISION
    requeues = REQUEUE_ON_TRIGGER if command is Command.TRIGGER else REQUEUE_ON_BACKFILL
    if status in requeues:
        return PeriodAction.REQUEUE
    if status in ACTIVE_STATUSES or status is RunStatus.SUCCESS:
        return PeriodAction.PRESENT
    if status is RunStatus.MANUAL_REQUIRED and command is Command.TRIGGER:
        return PeriodAction.APPROVE
    return PeriodAction.LEAVE


def decide_period(command: Command, existing: Sequence[Run], *, force_new: bool = False) -> PeriodDecision:
    """``decide_action`` on the latest of ``existing`` (every revision of one period)."""
    latest = latest_revision(existing)
    action = decide_action(command, None if latest is None else latest.status, force_new=force_new)
    return PeriodDecision(action, latest)
