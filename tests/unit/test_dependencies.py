"""The pure part of dependencies between schedules (SPEC §18): which upstream periods cover a run's
period, cycles, and what a run does past its window."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engine.core import dependencies
from engine.core.models import PeriodKind, RunStatus, SlotReason
from engine.core.schedule_spec import OnUpstream, ReportOn, ScheduleSpec

DAILY = ScheduleSpec(name="reportflow-daily", workflow="daily_report", project="p", cron="0 9 * * *",
                     timezone="Asia/Seoul")  # report_on previous: the 9:00 run reports on yesterday


def test_a_weekly_after_its_dailies_waits_for_every_daily_of_its_week() -> None:
    keys = dependencies.upstream_periods("2026-W49", DAILY, PeriodKind.DAY)
    assert keys == ["2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04", "2026-12-05", "2026-12-06"]


def test_a_weekday_daily_upstream_leaves_out_the_weekend_it_never_reports_on() -> None:
    weekdays = ScheduleSpec(name="d", workflow="daily_report", project="p", cron="0 9 * * 2-6", timezone="UTC")
    # Tuesday to Saturday at 9:00 report on Monday to Friday.
    assert dependencies.upstream_periods("2026-W49", weekdays, PeriodKind.DAY) == [
        "2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04"]


def test_a_daily_after_a_weekly_waits_for_the_week_that_holds_its_day() -> None:
    weekly = ScheduleSpec(name="w", workflow="weekly_report", project="p", cron="0 6 * * 1", timezone="UTC")
    assert dependencies.upstream_periods("2026-12-02", weekly, PeriodKind.WEEK) == ["2026-W49"]


def test_an_ops_report_after_the_days_reports_waits_for_that_day_and_a_slot_for_the_latest_slot() -> None:
    assert dependencies.upstream_periods("2026-12-02", DAILY, PeriodKind.DAY) == ["2026-12-02"]
    hourly = ScheduleSpec(name="h", workflow="x", project="p", cron="0 * * * *", timezone="UTC",
                          report_on=ReportOn.CURRENT)
    assert dependencies.upstream_periods("2026-12-02T10:30Z", hourly, PeriodKind.SLOT) == ["2026-12-02T10:00Z"]
    assert len(dependencies.upstream_periods("2026-12-02", hourly, PeriodKind.SLOT)) == 24


@pytest.mark.parametrize(("after", "cycle"), [
    ({"a": ["b"], "b": ["c"], "c": []}, None),
    ({"a": ["a"]}, ["a", "a"]),
    ({"a": ["b"], "b": ["c"], "c": ["a"]}, ["a", "b", "c", "a"]),
    ({"x": ["a"], "a": ["b"], "b": ["a"]}, ["a", "b", "a"]),
    ({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}, None),  # a diamond is no cycle
])
def test_cycles_are_found_with_their_path(after: dict[str, list[str]], cycle: list[str] | None) -> None:
    assert dependencies.find_cycle(after) == cycle


def test_past_its_window_each_on_upstream_decides_the_runs_status() -> None:
    assert dependencies.decide_past_window(OnUpstream.RUN) == dependencies.PastWindow(RunStatus.QUEUED, None)
    assert dependencies.decide_past_window(OnUpstream.MANUAL) == dependencies.PastWindow(
        RunStatus.MANUAL_REQUIRED, SlotReason.UPSTREAM)
    assert dependencies.decide_past_window(OnUpstream.SKIP) == dependencies.PastWindow(
        RunStatus.SKIPPED, SlotReason.UPSTREAM)


def test_the_default_window_is_six_hours_and_a_late_upstream_releases_the_run() -> None:
    assert DAILY.after_window == timedelta(hours=6) and DAILY.on_upstream is OnUpstream.RUN
    assert dependencies.describe([("reportflow-daily", "2026-12-02"), ("reportflow-daily", "2026-12-03"),
                                  ("ops", "2026-W49")]) == "reportflow-daily 2026-12-02, 2026-12-03; ops 2026-W49"


def test_a_dependent_schedules_default_deadline_leaves_room_for_its_wait() -> None:
    from engine.core import slo

    dependent = ScheduleSpec(name="w", workflow="weekly_report", project="p", cron="0 9 * * 1", timezone="UTC",
                             after=("reportflow-daily",), after_window=timedelta(hours=2))
    assert slo.deadline_of(dependent) == timedelta(minutes=40) + timedelta(hours=2)
    assert slo.deadline_of(DAILY) == timedelta(minutes=40)  # grace + max_runtime
