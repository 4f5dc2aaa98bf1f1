"""The creation policy's counts: one calendar month of a cron in its zone, DST included, and the verdicts."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from engine.core import run_counts
from engine.core.schedule_spec import DstFold, DstGap

BERLIN = "Europe/Berlin"


@pytest.mark.parametrize("expr, tz, month, gap, fold, per_month, per_day", [
    ("* * * * *", "UTC", date(2026, 2, 1), DstGap.SHIFT, DstFold.FIRST, 28 * 1440, 1440),
    # clocks go forward on 29 March: the hour 02:00-02:59 does not exist, its minutes fire once at 03:00
    ("* * * * *", BERLIN, date(2026, 3, 1), DstGap.SHIFT, DstFold.FIRST, 31 * 1440 - 60, 1440),
    ("* * * * *", BERLIN, date(2026, 3, 1), DstGap.SKIP, DstFold.FIRST, 31 * 1440 - 60, 1440),
    # and back on 25 October: the repeated hour fires once, or twice with dst_fold = "both"
    ("* * * * *", BERLIN, date(2026, 10, 1), DstGap.SHIFT, DstFold.FIRST, 31 * 1440, 1440),
    ("* * * * *", BERLIN, date(2026, 10, 1), DstGap.SHIFT, DstFold.BOTH, 31 * 1440 + 60, 1500),
    ("0 * * * *", BERLIN, date(2026, 3, 1), DstGap.SHIFT, DstFold.FIRST, 31 * 24 - 1, 24),
    ("0 * * * *", BERLIN, date(2026, 10, 1), DstGap.SHIFT, DstFold.BOTH, 31 * 24 + 1, 25),
    # a daily slot inside the gap: moved to 03:00 that day, or skipped
    ("30 2 * * *", BERLIN, date(2026, 3, 1), DstGap.SHIFT, DstFold.FIRST, 31, 1),
    ("30 2 * * *", BERLIN, date(2026, 3, 1), DstGap.SKIP, DstFold.FIRST, 30, 1),
    # weekdays: 22 in September 2026; the busiest day is one run, whatever the average
    ("30 18 * * 1-5", "Asia/Seoul", date(2026, 9, 1), DstGap.SHIFT, DstFold.FIRST, 22, 1),
    ("*/5 9-17 * * 1", "UTC", date(2026, 9, 1), DstGap.SHIFT, DstFold.FIRST, 4 * 108, 108),
    ("0 0 29 2 *", "UTC", date(2026, 2, 1), DstGap.SHIFT, DstFold.FIRST, 0, 0),
])
def test_a_month_of_runs_is_counted_in_the_schedules_zone(expr: str, tz: str, month: date, gap: DstGap,
                                                          fold: DstFold, per_month: int, per_day: int) -> None:
    counts = run_counts.count_month(expr, tz, month, dst_gap=gap, dst_fold=fold)
    assert (counts.per_month, counts.per_day) == (per_month, per_day)


def test_the_month_is_the_local_one() -> None:
    assert run_counts.month_of(datetime(2026, 8, 31, 20, 0, tzinfo=UTC), "Asia/Seoul") == date(2026, 9, 1)
    assert run_counts.month_of(datetime(2026, 8, 31, 20, 0, tzinfo=UTC), "UTC") == date(2026, 8, 1)


MINUTELY = run_counts.RunCounts(month=date(2026, 9, 1), per_month=43_200, per_day=1440)
DAILY = run_counts.RunCounts(month=date(2026, 9, 1), per_month=30, per_day=1)


@pytest.mark.parametrize("counts, warn, maximum, refused, warned", [
    (DAILY, 48, None, False, False),
    (MINUTELY, 48, None, False, True),  # a new schedule at 1,440 a day is no longer created silently
    (MINUTELY, 48, 1000, True, False),
    (MINUTELY, 2000, 1440, False, False),  # at the maximum is allowed
])
def test_the_policy_warns_and_refuses_by_the_busiest_day(counts: run_counts.RunCounts, warn: int,
                                                         maximum: int | None, refused: bool, warned: bool) -> None:
    verdict = run_counts.decide("s", counts, warn_per_day=warn, max_per_day=maximum)
    assert (verdict.refused is not None, verdict.warning is not None) == (refused, warned)


def test_model_time_is_the_median_generation_times_the_runs_or_no_history() -> None:
    assert run_counts.model_time([], 30) == "model time: no generation recorded yet"
    assert run_counts.model_time([60.0, 120.0, 9000.0], 30) == (
        "model time: about 1.0 h a month (120 s median of the last 3 generations x 30 runs)")


@pytest.mark.parametrize(("expr", "month", "said"), [
    ("0 9 * * 1", date(2026, 11, 1), "1 run a week, 5 runs in November 2026"),
    ("0 9 1 * *", date(2026, 11, 1), "1 run a month, 1 run in November 2026"),
    ("0 9 1 1,4,7,10 *", date(2026, 11, 1), "no run in November 2026"),
    ("0 9 1 1,4,7,10 *", date(2027, 1, 1), "1 run a month, 1 run in January 2027"),
])
def test_a_weekly_a_monthly_and_a_quarterly_say_how_often(expr: str, month: date, said: str) -> None:
    assert run_counts.count_month(expr, "Asia/Seoul", month).describe() == said
