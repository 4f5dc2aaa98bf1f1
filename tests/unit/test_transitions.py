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
    for target in S:
        for source in transitions.sources(target):
            assert transitions.is_allowed(source, target)
    assert S.RUNNING in transitions.sources(S.SUCCESS)
    assert S.PENDING not in transitions.sources(S.SUCCESS)


def test_no_status_leads_back_into_pending_or_manual_required() -> None:
    assert transitions.sources(S.PENDING) == frozenset()
    assert transitions.sources(S.MANUAL_REQUIRED) == frozenset()
