"""The §12 table, as one pure decider for ``trigger`` and ``backfill``."""

from __future__ import annotations

import pytest

from engine.core import revisions
from engine.core.models import RunStatus
from engine.core.revisions import Command, PeriodAction

TABLE = [  # status, backfill, trigger
    (None, PeriodAction.CREATE, PeriodAction.CREATE),
    (RunStatus.MISSED, PeriodAction.REQUEUE, PeriodAction.REQUEUE),
    (RunStatus.SKIPPED, PeriodAction.REQUEUE, PeriodAction.REQUEUE),
    (RunStatus.CANCELLED, PeriodAction.REQUEUE, PeriodAction.REQUEUE),
    (RunStatus.FAILED, PeriodAction.LEAVE, PeriodAction.REQUEUE),
    (RunStatus.PARTIAL_SUCCESS, PeriodAction.LEAVE, PeriodAction.REQUEUE),
    (RunStatus.MANUAL_REQUIRED, PeriodAction.LEAVE, PeriodAction.APPROVE),
    (RunStatus.QUEUED, PeriodAction.PRESENT, PeriodAction.PRESENT),
    (RunStatus.RUNNING, PeriodAction.PRESENT, PeriodAction.PRESENT),
    (RunStatus.SUCCESS, PeriodAction.PRESENT, PeriodAction.PRESENT),
]


@pytest.mark.parametrize(("status", "backfill", "trigger"), TABLE)
def test_the_section_12_table(status: RunStatus | None, backfill: PeriodAction, trigger: PeriodAction) -> None:
    assert revisions.decide_action(Command.BACKFILL, status) is backfill
    assert revisions.decide_action(Command.TRIGGER, status) is trigger


def test_force_new_makes_a_revision_only_for_trigger_and_only_when_a_row_exists() -> None:
    assert revisions.decide_action(Command.TRIGGER, RunStatus.SUCCESS, force_new=True) is PeriodAction.REVISION
    assert revisions.decide_action(Command.TRIGGER, None, force_new=True) is PeriodAction.CREATE
    assert revisions.decide_action(Command.BACKFILL, RunStatus.SUCCESS, force_new=True) is PeriodAction.PRESENT


@pytest.mark.parametrize("reason", ["holiday", "maintenance"])
def test_a_backfill_leaves_a_slot_skipped_on_purpose_unless_asked(reason: str) -> None:
    assert revisions.decide_action(Command.BACKFILL, RunStatus.SKIPPED, reason=reason) is PeriodAction.LEAVE
    assert revisions.decide_action(Command.BACKFILL, RunStatus.SKIPPED, reason=reason,
                                   include_skipped=True) is PeriodAction.REQUEUE
    assert revisions.decide_action(Command.TRIGGER, RunStatus.SKIPPED, reason=reason) is PeriodAction.REQUEUE
    assert revisions.decide_action(Command.BACKFILL, RunStatus.MISSED, reason="too_old") is PeriodAction.REQUEUE


def test_one_pending_revision_per_period() -> None:
    """Security round 3, item 9: a revision asked for while the last revision made has not started adds nothing."""
    assert revisions.decide_action(Command.TRIGGER, RunStatus.QUEUED, force_new=True, revision=2) is PeriodAction.PRESENT
    assert revisions.decide_action(Command.TRIGGER, RunStatus.RUNNING, force_new=True,
                                   revision=2) is PeriodAction.REVISION
    assert revisions.decide_action(Command.TRIGGER, RunStatus.QUEUED, force_new=True, revision=1) is PeriodAction.REVISION
    assert revisions.decide_action(Command.TRIGGER, RunStatus.SUCCESS, force_new=True,
                                   revision=3) is PeriodAction.REVISION
