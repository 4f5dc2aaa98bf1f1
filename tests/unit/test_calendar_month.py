"""The month grid's layout (``calendar_view.plan_month``) and the quiet cell (``plan_cells`` with run facts): pure."""

from __future__ import annotations

from datetime import UTC, date, datetime

from engine.read import calendar_view
from engine.read.calendar_view import Cell


def cell(day: date, state: str = "SUCCESS") -> Cell:
    return Cell(day.isoformat(), day, datetime(day.year, day.month, day.day, 3, tzinfo=UTC), state)


def test_a_month_is_whole_weeks_monday_first_with_today_marked() -> None:
    weeks = calendar_view.plan_month([cell(date(2026, 2, 1)), cell(date(2026, 1, 31), "MISSED")],
                                     date(2026, 2, 1), today=date(2026, 2, 11))
    days = [d for week in weeks for d in week]
    assert all(len(week) == 7 for week in weeks) and len(weeks) == 5
    assert days[0].day == date(2026, 1, 26) and days[0].day.weekday() == 0 and days[-1].day == date(2026, 3, 1)
    assert [d.day for d in days if d.today] == [date(2026, 2, 11)]
    assert not days[5].in_month and days[6].in_month  # 2026-02-01 is a Sunday
    assert [c.state for c in days[5].cells] == ["MISSED"] and [c.state for c in days[6].cells] == ["SUCCESS"]


def test_a_month_starting_on_monday_has_no_leading_days() -> None:
    weeks = calendar_view.plan_month([], date(2027, 2, 1), today=date(2027, 3, 1))
    assert weeks[0][0].day == date(2027, 2, 1) and len(weeks) == 4  # February 2027: exactly four weeks
    assert all(d.in_month and not d.today for week in weeks for d in week)


def test_grid_span_of_december_reaches_into_january() -> None:
    assert calendar_view.grid_span(date(2026, 12, 15)) == (date(2026, 11, 30), date(2027, 1, 3))
