"""When ``freshness_low`` is raised (``core.freshness``): the freshness now below the target, judged at the latest
period due, with the number of judgements in a row that found it low."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.core import alerts, freshness, slo
from engine.core.models import RunStatus
from engine.core.schedule_spec import Criticality

DEADLINE = timedelta(hours=1)
WINDOW = timedelta(days=30)


def day(n: int) -> datetime:
    return datetime(2026, 7, 1, 9, 0, tzinfo=UTC) + timedelta(days=n - 1)


def facts(days: range, late: set[int]) -> dict[datetime, slo.PeriodFact]:
    """Every period SUCCESS, ten minutes after its slot, but the ``late`` ones, three hours after."""
    return {day(n): slo.PeriodFact(day(n), RunStatus.SUCCESS,
                                   day(n) + (timedelta(hours=3) if n in late else timedelta(minutes=10)))
            for n in days}


SLOTS = [day(n) for n in range(1, 61)]
NOW = day(60) + timedelta(hours=2)


def test_two_late_periods_in_thirty_bring_95_percent_down_and_it_is_judged_at_the_latest_period() -> None:
    low = freshness.decide_freshness_low(SLOTS, facts(range(1, 61), {50, 55}), now=NOW, deadline=DEADLINE,
                                         window=WINDOW, target=0.95)
    assert low is not None
    assert (low.slot_at, round(low.freshness, 4), low.periods_due) == (day(60), 0.9333, 30)
    assert low.consecutive == 6  # the judgements of days 55..60 each saw both late periods


def test_at_or_above_the_target_nothing_is_raised() -> None:
    assert freshness.decide_freshness_low(SLOTS, facts(range(1, 61), {55}), now=NOW, deadline=DEADLINE,
                                          window=WINDOW, target=0.95) is None  # 29 of 30
    assert freshness.decide_freshness_low(SLOTS, facts(range(1, 61), set()), now=NOW, deadline=DEADLINE,
                                          window=WINDOW, target=1.0) is None
    assert freshness.decide_freshness_low([], {}, now=NOW, deadline=DEADLINE, window=WINDOW, target=0.95) is None


def test_a_period_with_no_run_is_not_fresh() -> None:
    known = facts(range(1, 61), set())
    del known[day(58)], known[day(59)]
    low = freshness.decide_freshness_low(SLOTS, known, now=NOW, deadline=DEADLINE, window=WINDOW, target=0.95)
    assert low is not None and low.consecutive == 2  # judged low at 59 and 60


def test_freshness_low_grows_in_severity_like_a_failed_period() -> None:
    low = alerts.AlertEvent.FRESHNESS_LOW
    assert alerts.decide_severity(low, Criticality.HIGH, 3).severity is alerts.Severity.CRITICAL
    assert not alerts.decide_severity(low, Criticality.LOW, 1).notify
