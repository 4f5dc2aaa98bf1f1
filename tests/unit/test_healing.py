"""The recovery decision (SPEC §15.5): failure, provider health, budget and now in; what becomes of the run out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from engine.core import healing
from engine.core.healing import HealAction, HealBudget, ProviderHealth
from engine.core.models import ProviderWait, RunStatus

FAILED_AT = datetime(2026, 9, 29, 10, 30, tzinfo=UTC)
NOW = datetime(2026, 9, 29, 11, 30, tzinfo=UTC)
EVERY = timedelta(minutes=5)
LABEL = "ollama at http://127.0.0.1:11434"

WAIT = ProviderWait(run_id=7, provider="ollama:http://127.0.0.1:11434", label=LABEL, error_code="MODEL_UNAVAILABLE",
                    step="GENERATE_REPORT", degraded=False, since_at=FAILED_AT, recoveries=0, check_after=FAILED_AT)
DEGRADED = replace(WAIT, degraded=True)
NOTION = replace(WAIT, provider="notion:api:database d1", label="notion (database d1)",
                 error_code="NOTION_UNAUTHORIZED", step="UPLOAD_NOTION")


def health(*, healthy: bool, checked: datetime = NOW - timedelta(minutes=1),
           since: datetime = NOW - timedelta(minutes=1)) -> ProviderHealth:
    return ProviderHealth(provider=WAIT.provider, label=LABEL, healthy=healthy,
                          detail="serves llama3.1:8b" if healthy else "not reachable (ConnectError)",
                          checked_at=checked, since_at=since, next_check_at=checked + EVERY)


UP = health(healthy=True)
DOWN = health(healthy=False, since=FAILED_AT - timedelta(minutes=20))
STALE_UP = health(healthy=True, checked=FAILED_AT - timedelta(minutes=2), since=FAILED_AT - timedelta(days=1))
BUDGET = HealBudget(per_run=3, used=0, daily=50, used_today=0)

# (case, wait, status, error code of the run, health, budget, schedule enabled) -> action
CASES = [
    ("failed run, provider back", WAIT, RunStatus.FAILED, "MODEL_UNAVAILABLE", UP, BUDGET, True, HealAction.REQUEUE),
    ("partial run, notion back", NOTION, RunStatus.PARTIAL_SUCCESS, "NOTION_UNAUTHORIZED", UP, BUDGET, True,
     HealAction.REQUEUE),
    ("fallback report, model back", DEGRADED, RunStatus.SUCCESS, None, UP, BUDGET, True, HealAction.REQUEUE),
    ("provider still down", WAIT, RunStatus.FAILED, "MODEL_UNAVAILABLE", DOWN, BUDGET, True, HealAction.WAIT),
    ("never probed", WAIT, RunStatus.FAILED, "MODEL_UNAVAILABLE", None, BUDGET, True, HealAction.WAIT),
    ("healthy, but probed before the run failed", WAIT, RunStatus.FAILED, "MODEL_UNAVAILABLE", STALE_UP, BUDGET,
     True, HealAction.WAIT),
    ("per-run budget spent", WAIT, RunStatus.FAILED, "MODEL_UNAVAILABLE", UP, replace(BUDGET, used=3), True,
     HealAction.GIVE_UP),
    ("per-run budget spent, provider down too", WAIT, RunStatus.FAILED, "MODEL_UNAVAILABLE", DOWN,
     replace(BUDGET, used=3), True, HealAction.GIVE_UP),
    ("auto_recover = 0", WAIT, RunStatus.FAILED, "MODEL_UNAVAILABLE", UP, replace(BUDGET, per_run=0), True,
     HealAction.GIVE_UP),
    ("auto_recover_daily = 0", WAIT, RunStatus.FAILED, "MODEL_UNAVAILABLE", UP, replace(BUDGET, daily=0), True,
     HealAction.GIVE_UP),
    ("daily cap reached", WAIT, RunStatus.FAILED, "MODEL_UNAVAILABLE", UP, replace(BUDGET, used_today=50), True,
     HealAction.HOLD),
    ("schedule disabled", WAIT, RunStatus.FAILED, "MODEL_UNAVAILABLE", UP, BUDGET, False, HealAction.HOLD),
    ("an operator queued it again", WAIT, RunStatus.QUEUED, None, UP, BUDGET, True, HealAction.IDLE),
    ("running again", WAIT, RunStatus.RUNNING, None, UP, BUDGET, True, HealAction.IDLE),
    ("now failed with another code", WAIT, RunStatus.FAILED, "GIT_REPO_NOT_FOUND", UP, BUDGET, True,
     HealAction.FORGET),
    ("cancelled", WAIT, RunStatus.CANCELLED, "CANCELLED", UP, BUDGET, True, HealAction.FORGET),
    ("failed run that succeeded since", WAIT, RunStatus.SUCCESS, None, UP, BUDGET, True, HealAction.FORGET),
    ("fallback report that failed since", DEGRADED, RunStatus.FAILED, "REPORT_WRITE_FAILED", UP, BUDGET, True,
     HealAction.FORGET),
]


@pytest.mark.parametrize(("case", "wait", "status", "code", "found", "budget", "enabled", "action"), CASES,
                         ids=[c[0] for c in CASES])
def test_decide_heal(case: str, wait: ProviderWait, status: RunStatus, code: str | None,
                     found: ProviderHealth | None, budget: HealBudget, enabled: bool, action: HealAction) -> None:
    decision = healing.decide_heal(wait, status=status, error_code=code, health=found, budget=budget,
                                   schedule_enabled=enabled, now=NOW, every=EVERY)
    assert decision.action is action, decision.reason
    if action in (HealAction.WAIT, HealAction.HOLD):
        assert decision.check_after is not None and decision.check_after > NOW  # never a busy loop
    else:
        assert decision.check_after is None


def test_a_waiting_run_is_looked_at_again_at_the_providers_next_probe() -> None:
    decision = healing.decide_heal(WAIT, status=RunStatus.FAILED, error_code="MODEL_UNAVAILABLE", health=DOWN,
                                   budget=BUDGET, schedule_enabled=True, now=NOW, every=EVERY)
    assert decision.check_after == DOWN.next_check_at
    overdue = replace(DOWN, next_check_at=NOW - timedelta(minutes=1))
    decision = healing.decide_heal(WAIT, status=RunStatus.FAILED, error_code="MODEL_UNAVAILABLE", health=overdue,
                                   budget=BUDGET, schedule_enabled=True, now=NOW, every=EVERY)
    assert decision.check_after == NOW + EVERY


def test_probe_due() -> None:
    assert healing.probe_due(None, NOW)
    assert not healing.probe_due(UP, NOW)
    assert healing.probe_due(UP, UP.next_check_at)


@pytest.mark.parametrize(("wait", "expected"), [
    (replace(WAIT, healthy=False, health_since_at=FAILED_AT, health_detail="connection refused"),
     f"waits for {LABEL}: down since 2026-09-29T10:30:00Z (connection refused); "
     "re-queued from GENERATE_REPORT automatically when it answers"),
    (replace(WAIT, healthy=True, health_since_at=NOW),
     f"waits for {LABEL}: answering since 2026-09-29T11:30:00Z; "
     "re-queued from GENERATE_REPORT automatically at the next health check"),
    (replace(DEGRADED, healthy=False, health_since_at=FAILED_AT),
     f"waits for {LABEL}: down since 2026-09-29T10:30:00Z; written without it (MODEL_UNAVAILABLE); "
     "written again in place when it answers"),
    (WAIT, f"waits for {LABEL}: not probed yet; re-queued from GENERATE_REPORT automatically when it answers"),
    (replace(WAIT, healthy=False, health_since_at=FAILED_AT, gave_up="its 3 automatic re-queues are spent"),
     f"waits for {LABEL}: down since 2026-09-29T10:30:00Z; no automatic re-queue: its 3 automatic re-queues are "
     "spent; `reportflow runs retry 7` when it is fixed"),
])
def test_describe_wait(wait: ProviderWait, expected: str) -> None:
    assert healing.describe_wait(wait) == expected
