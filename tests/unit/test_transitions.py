from __future__ import annotations

import pytest

from engine.core import errors, transitions
from engine.core.models import RunStatus as S


@pytest.mark.parametrize(("current", "target"), [
    (S.PENDING, S.SUCCESS), (S.QUEUED, S.SUCCESS), (S.SUCCESS, S.RUNNING), (S.MISSED, S.RUNNING),
    (S.FAILED, S.SUCCESS), (S.CANCELLED, S.RUNNING), (S.PENDING, S.RUNNING),
])
def test_illegal_transitions_are_refused(current: S, target: S) -> None:
    with pytest.raises(errors.InvalidTransition) as info:
        transitions.transition(current, target)
    assert info.value.exit_code == 3
    assert current.value in info.value.message and target.value in info.value.message


@pytest.mark.parametrize(("current", "target"), [
    (S.PENDING, S.QUEUED), (S.QUEUED, S.RUNNING), (S.RUNNING, S.SUCCESS), (S.RUNNING, S.RETRY_PENDING),
    (S.RETRY_PENDING, S.RUNNING), (S.MANUAL_REQUIRED, S.QUEUED), (S.FAILED, S.QUEUED),
])
def test_legal_transitions(current: S, target: S) -> None:
    assert transitions.transition(current, target) is target


def test_sources_is_the_inverse_of_the_table() -> None:
    """The SQL guard of every target admits exactly the statuses transition() accepts: none missing, none extra."""
    def accepted(source: S, target: S) -> bool:
        try:
            transitions.transition(source, target)
        except errors.InvalidTransition:
            return False
        return True

    for target in S:
        assert transitions.sources(target) == {source for source in S if accepted(source, target)}, target
    assert transitions.sources(S.SUCCESS) == {S.RUNNING}
    assert transitions.sources(S.RUNNING) == {S.QUEUED, S.RETRY_PENDING}


def test_no_status_leads_back_into_pending_and_only_a_dependent_wait_into_manual_required() -> None:
    assert transitions.sources(S.PENDING) == frozenset()
    # A dependent run whose upstream did not succeed in its window, with on_upstream = "manual" (SPEC §18).
    assert transitions.sources(S.MANUAL_REQUIRED) == frozenset({S.WAITING})


def test_status_subsets_are_named_once_and_relate_as_their_rules_say() -> None:
    from engine.core import models

    every = set(models.RunStatus)
    active, terminal, operator = models.ACTIVE_STATUSES, models.TERMINAL_STATUSES, models.AWAITING_OPERATOR_STATUSES
    # Every status is active, terminal or awaiting an operator, and only one of those.
    assert active | terminal | operator == every
    assert not (active & terminal) and not (active & operator) and not (terminal & operator)
    assert models.UNFINISHED_STATUSES == every - terminal
    assert set(models.CLAIMABLE_STATUSES) <= models.HOLDABLE_STATUSES <= active
    assert set(models.BUSY_STATUSES) <= active and models.RunStatus.WAITING in models.BUSY_STATUSES
    assert models.CANCELLABLE_STATUSES == models.HOLDABLE_STATUSES | operator
    assert models.UNRUN_STATUSES <= terminal and models.SUCCESSFUL_STATUSES <= terminal
    assert not (models.UNRUN_STATUSES & models.SUCCESSFUL_STATUSES)
    assert models.RETRYABLE_STATUSES.isdisjoint({models.RunStatus.SUCCESS, models.RunStatus.RUNNING})
    assert models.UNSUCCESSFUL_STATUSES.isdisjoint(active) and models.RunStatus.SUCCESS not in models.UNSUCCESSFUL_STATUSES
