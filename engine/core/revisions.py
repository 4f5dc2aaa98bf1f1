"""What ``trigger`` and ``backfill`` do with a business period that may have rows (SPEC §12).

One pure decider for both commands: it looks at the period's **latest revision**
only, so once ``trigger --force-new`` made r2, a backfill never re-queues r1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from engine.core.models import (
    ACTIVE_STATUSES,
    FAILURE_STATUSES,
    HOLDABLE_STATUSES,
    UNRUN_STATUSES,
    Run,
    RunStatus,
    SlotReason,
)


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
REQUEUE_ON_TRIGGER = REQUEUE_ON_BACKFILL | FAILURE_STATUSES


@dataclass(frozen=True)
class PeriodDecision:
    action: PeriodAction
    run: Run | None  # the latest revision the action applies to (None for CREATE)


def latest_revision(existing: Sequence[Run]) -> Run | None:
    """The period's row with the highest revision, or None when it has none."""
    return max(existing, key=lambda run: run.revision, default=None)


#: Slots left unrun on purpose (a holiday, a maintenance window or a pause): a backfill leaves them unless asked.
ON_PURPOSE = frozenset({SlotReason.HOLIDAY.value, SlotReason.MAINTENANCE.value})


def decide_action(command: Command, status: RunStatus | None, *, force_new: bool = False, reason: str | None = None,
                  include_skipped: bool = False, revision: int = 1) -> PeriodAction:
    """The period table: what ``command`` does with a period whose latest revision (number ``revision``) has
    ``status`` (and ``reason``).

    A backfill leaves a slot skipped on purpose (``ON_PURPOSE``) unless ``include_skipped``. ``--force-new``
    makes one pending revision per period: asked again while the last revision it made has not started, it
    adds nothing."""
    if status is None:
        return PeriodAction.CREATE
    if force_new and command is Command.TRIGGER:
        pending = revision > 1 and status in HOLDABLE_STATUSES
        return PeriodAction.PRESENT if pending else PeriodAction.REVISION
    if command is Command.BACKFILL and status in UNRUN_STATUSES and reason in ON_PURPOSE and not include_skipped:
        return PeriodAction.LEAVE
    requeues = REQUEUE_ON_TRIGGER if command is Command.TRIGGER else REQUEUE_ON_BACKFILL
    if status in requeues:
        return PeriodAction.REQUEUE
    if status in ACTIVE_STATUSES or status is RunStatus.SUCCESS:
        return PeriodAction.PRESENT
    if status is RunStatus.MANUAL_REQUIRED and command is Command.TRIGGER:
        return PeriodAction.APPROVE
    return PeriodAction.LEAVE


def decide_period(command: Command, existing: Sequence[Run], *, force_new: bool = False,
                  include_skipped: bool = False) -> PeriodDecision:
    """``decide_action`` on the latest of ``existing`` (every revision of one period)."""
    latest = latest_revision(existing)
    action = decide_action(command, None if latest is None else latest.status, force_new=force_new,
                           reason=None if latest is None else latest.reason, include_skipped=include_skipped,
                           revision=1 if latest is None else latest.revision)
    return PeriodDecision(action, latest)
