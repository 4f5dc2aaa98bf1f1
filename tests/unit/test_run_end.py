"""What a run's end sets off (``core.run_end.decide_after_effects``) and the line its alert says."""

from __future__ import annotations

import pytest

from engine.core import run_end
from engine.core.models import AttemptOutcome, AttemptTrigger, RunStatus
from engine.core.run_end import RunEnd

S, A = RunStatus, AttemptOutcome


@pytest.mark.parametrize(("end", "has_parent", "expected"), [
    # status, outcome -> give back the attempt, promote the next, release the parent, alert, recovered
    (RunEnd(S.SUCCESS, A.SUCCESS), True, (False, True, True, None, True)),
    (RunEnd(S.FAILED, A.FAILED), False, (False, True, False, "run_failed", False)),
    (RunEnd(S.FAILED, A.LOST), True, (False, True, True, "run_failed", False)),
    (RunEnd(S.PARTIAL_SUCCESS, A.PARTIAL_SUCCESS), False, (False, True, False, "run_partial", False)),
    (RunEnd(S.CANCELLED, A.CANCELLED), True, (False, True, True, None, False)),
    # Still in flight: the schedule's slot stays taken and the parent keeps waiting.
    (RunEnd(S.RETRY_PENDING, A.RETRY, next_trigger=AttemptTrigger.AUTO), True, (False, False, False, None, False)),
    (RunEnd(S.RETRY_PENDING, A.LOST, next_trigger=AttemptTrigger.RECOVERY), True, (False, False, False, None, False)),
    (RunEnd(S.QUEUED, A.RELEASED, next_trigger=AttemptTrigger.HANDBACK), True, (True, False, False, None, False)),
    (RunEnd(S.WAITING, A.RELEASED), True, (True, False, False, None, False)),
])
def test_after_effects_of_each_end(end: RunEnd, has_parent: bool,
                                   expected: tuple[bool, bool, bool, str | None, bool]) -> None:
    effects = run_end.decide_after_effects(end, has_parent=has_parent)
    assert (effects.give_back_attempt, effects.promote_next, effects.release_parent, effects.alert,
            effects.recovered) == expected


def test_the_alert_names_the_step_the_code_and_the_reason() -> None:
    failed = RunEnd(S.FAILED, A.FAILED, error_code="NOTION_UNAUTHORIZED", failed_step="upload")
    assert run_end.alert_summary(7, "k", failed) == "run 7 k failed at upload: NOTION_UNAUTHORIZED"
    lost = RunEnd(S.FAILED, A.LOST, error_code="LEASE_EXPIRED", reason="lease expired")
    assert run_end.alert_summary(7, "k", lost) == "run 7 k failed: LEASE_EXPIRED (lease expired)"
    partial = RunEnd(S.PARTIAL_SUCCESS, A.PARTIAL_SUCCESS)
    assert run_end.alert_summary(7, "k", partial) == "run 7 k ended PARTIAL_SUCCESS: ERROR"
