"""Heals itself (SPEC §15.5): provider health, and what becomes of a run that waits for a provider.

Pure: every function here is a function of values and ``now``. A run that ended
FAILED or PARTIAL_SUCCESS because an outside service failed it, or that succeeded
around one (a fallback writer), *waits* for that provider (``models.ProviderWait``).
The healer (``engine.execution.healing``) probes the providers, records their health,
and asks ``decide_heal`` what to do with each waiting run: re-queue it from its step,
look again later, or give up and leave it to a person.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from engine.core.clock import format_instant
from engine.core.models import ACTIVE_STATUSES, FAILURE_STATUSES, ProviderWait, RunStatus

#: Statuses a run that waits for a provider ends in (a degraded run: SUCCESS).
FINISHED_WAITING = FAILURE_STATUSES


class HealAction(StrEnum):
    REQUEUE = "requeue"  # the provider answers again: queue the run from its step
    WAIT = "wait"  # the provider is down, or not probed since the run ended: look again later
    HOLD = "hold"  # the provider answers, but the schedule is disabled or its daily cap is spent
    GIVE_UP = "give_up"  # the run's automatic re-queues are spent (or off): a person must act
    FORGET = "forget"  # the run no longer ends the way it waited (an operator acted, another failure)
    IDLE = "idle"  # the run is queued or running again: nothing until it finishes


@dataclass(frozen=True)
class ProviderHealth:
    """A provider's latest probe: healthy or not, since when, and when it is probed next."""

    provider: str
    label: str
    healthy: bool
    detail: str
    checked_at: datetime
    since_at: datetime  # when it last changed between healthy and not
    next_check_at: datetime


@dataclass(frozen=True)
class HealBudget:
    """Automatic re-queues: of this run (``per_run``, ``used``) and of its schedule in the last 24 hours."""

    per_run: int
    used: int
    daily: int
    used_today: int


@dataclass(frozen=True)
class HealDecision:
    action: HealAction
    reason: str
    check_after: datetime | None = None  # when to look at the run again (None: when it ends again)


def probe_due(health: ProviderHealth | None, now: datetime) -> bool:
    """Whether a provider is probed now: never probed, or its next check has come."""
    return health is None or health.next_check_at <= now


def next_check(health: ProviderHealth | None, now: datetime, every: timedelta) -> datetime:
    """When a run that waits for this provider is looked at again: its next probe, never sooner than now."""
    if health is not None and health.next_check_at > now:
        return health.next_check_at
    return now + every


def decide_heal(wait: ProviderWait, *, status: RunStatus, error_code: str | None, health: ProviderHealth | None,
                budget: HealBudget, schedule_enabled: bool, now: datetime, every: timedelta) -> HealDecision:
    """What becomes of a run that waits for a provider, at ``now``.

    - A run queued or running again (an operator's retry) is left alone until it ends.
    - A run that no longer ends as it waited (another error code, cancelled, a degraded
      run that is no longer SUCCESS) is forgotten.
    - With its budget spent (``auto_recover`` re-queues of this run, or 0), nothing more is
      tried: a person must act.
    - The provider must have answered a probe made *after* the run ended: an older healthy
      answer is what the run just disproved (that rule, and the budget, stop a re-queue loop).
    - A disabled schedule, or one whose ``auto_recover_daily`` re-queues in 24 hours are spent,
      holds the run until later.
    """
    if status in ACTIVE_STATUSES:
        return HealDecision(HealAction.IDLE, f"the run is {status.value}")
    waiting = status is RunStatus.SUCCESS if wait.degraded else (
        status in FINISHED_WAITING and error_code == wait.error_code)
    if not waiting:
        return HealDecision(HealAction.FORGET, f"the run is {status.value} {error_code or ''}".rstrip())
    if budget.per_run <= 0 or budget.daily <= 0:
        return HealDecision(HealAction.GIVE_UP, "automatic re-queues are off for its schedule (auto_recover = 0)")
    if budget.used >= budget.per_run:
        return HealDecision(HealAction.GIVE_UP, f"its {budget.per_run} automatic re-queues are spent (auto_recover)")
    later = next_check(health, now, every)
    if health is None:
        return HealDecision(HealAction.WAIT, f"{wait.label} has not been probed yet", later)
    if health.checked_at <= wait.since_at:
        return HealDecision(HealAction.WAIT, f"{wait.label} has not been probed since the run ended", later)
    if not health.healthy:
        return HealDecision(HealAction.WAIT, f"{wait.label} is down: {health.detail}", later)
    if not schedule_enabled:
        return HealDecision(HealAction.HOLD, "its schedule is disabled", later)
    if budget.used_today >= budget.daily:
        return HealDecision(HealAction.HOLD, f"its schedule made {budget.daily} automatic re-queues in 24 hours "
                                             "(auto_recover_daily)", later)
    what = "written again in place by" if wait.degraded else "re-queued: it answers again,"
    return HealDecision(HealAction.REQUEUE, f"{what} {wait.label} (since {format_instant(health.since_at)})")


def describe_wait(wait: ProviderWait) -> str:
    """One line for a person: what the run waits for, how that provider is, and what will happen."""
    since = format_instant(wait.health_since_at) if wait.health_since_at else None
    if wait.healthy is None:
        state = "not probed yet"
    elif wait.healthy:
        state = f"answering since {since}"
    else:
        state = f"down since {since}" + (f" ({wait.health_detail})" if wait.health_detail else "")
    if wait.gave_up:
        then = f"no automatic re-queue: {wait.gave_up}; `reportflow runs retry {wait.run_id}` when it is fixed"
    elif wait.degraded:
        when = "at the next health check" if wait.healthy else "when it answers"
        then = f"written without it ({wait.error_code}); written again in place {when}"
    else:
        when = "at the next health check" if wait.healthy else "when it answers"
        then = f"re-queued from {wait.step} automatically {when}"
    return f"waits for {wait.label}: {state}; {then}"
