"""Which earlier periods a report may reach over: only those that will never have a report of their own."""

from __future__ import annotations

import pytest

from engine.core import period_fates
from engine.core.models import RunStatus
from engine.core.period_fates import Fate


@pytest.mark.parametrize(("status", "began", "fate"), [
    (RunStatus.MISSED, False, Fate.NEVER), (RunStatus.SKIPPED, False, Fate.NEVER),
    (RunStatus.CANCELLED, False, Fate.NEVER),
    (RunStatus.CANCELLED, True, Fate.OWN),  # it may have pinned its range: a retry reports it
    (RunStatus.FAILED, True, Fate.OWN), (RunStatus.FAILED, False, Fate.OWN),  # a retry holds its commits
    (RunStatus.QUEUED, False, Fate.OWN), (RunStatus.RETRY_PENDING, True, Fate.OWN),
    (RunStatus.RUNNING, True, Fate.OWN), (RunStatus.WAITING, True, Fate.OWN),
    (RunStatus.MANUAL_REQUIRED, False, Fate.OWN), (RunStatus.SUCCESS, True, Fate.OWN),
])
def test_a_period_with_a_run(status: RunStatus, began: bool, fate: Fate) -> None:
    assert period_fates.fate_of(status, "misfire", began=began, has_slot=True)[0] is fate


def test_a_period_without_a_run() -> None:
    assert period_fates.fate_of(None, began=False, has_slot=False) == (Fate.NEVER, "no slot")
    assert period_fates.fate_of(None, began=False, has_slot=True, too_old=True) == (Fate.NEVER, "too_old")
    # A slot with no row yet: a backfill in progress may still create it.
    assert period_fates.fate_of(None, began=False, has_slot=True)[0] is Fate.OPEN
    assert period_fates.fate_of(RunStatus.MISSED, "too_old", began=False, has_slot=True)[1] == "MISSED (too_old)"
