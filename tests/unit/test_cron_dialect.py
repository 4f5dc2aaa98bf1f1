"""The cron dialect: N-N is N, a list star is the whole field, no input ever escapes as a traceback."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core import errors
from engine.core.cron import expression, timetable, validate
from engine.core.models import PeriodKind
from engine.core.schedule_spec import ScheduleSpec

NOW = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday


def local_days(expr: str, count: int = 6) -> list[str]:
    return [f"{fire.local:%a %Y-%m-%d %H:%M}" for fire in timetable.preview(expr, "UTC", NOW, count)]


@pytest.mark.parametrize(("expr", "single"), [
    ("0 9-9 * * 1-5", "0 9 * * 1-5"),
    ("0 0 * * 1-1", "0 0 * * 1"),
    ("0 0 * * MON-MON", "0 0 * * MON"),
    ("0 0 * * mon-1", "0 0 * * 1"),
    ("0 0 * * 7-7", "0 0 * * 0"),
    ("30 7 15-15 * *", "30 7 15 * *"),
    ("0 0 1 JAN-JAN *", "0 0 1 1 *"),
    ("5-5 * * * *", "5 * * * *"),
    ("0 0 5-5/2 * *", "0 0 5 * *"),  # croniter reads 5-5/2 as every odd day
    ("0 0 1 1 1-1", "0 0 1 1 1"),  # with a restricted day-of-month, 1-1 must not mean every weekday
    ("0 0 * * 1-1,3-3", "0 0 * * 1,3"),
])
def test_a_range_n_n_is_the_single_value_n(expr: str, single: str) -> None:
    assert local_days(expr) == local_days(single)
    assert validate.check(expr, "UTC", now=NOW).runs_per_day == validate.check(single, "UTC", now=NOW).runs_per_day


def test_weekday_range_n_n_passes_as_weekly_not_daily() -> None:
    assert validate.check("0 9-9 * * 1-5", "UTC", now=NOW).runs_per_day == pytest.approx(5 / 7, abs=0.01)
    weekly = validate.check("0 0 * * 1-1", "UTC", now=NOW, period=PeriodKind.DAY)
    assert weekly.ok and weekly.runs_per_day == pytest.approx(1 / 7, abs=0.01)
    assert [f.local.day for f in timetable.preview("30 7 15-15 * *", "UTC", NOW, 3)] == [15, 15, 15]


@pytest.mark.parametrize(("expr", "whole"), [
    ("* * * * *,0", "* * * * *"),
    ("*,5 * * * *", "* * * * *"),
    ("0 *,3 * * *", "0 * * * *"),
    ("0 0 * *,2 *", "0 0 * * *"),
    ("0 0 * * *,sat#3", "0 0 * * *"),
    ("0 0 *,5 * 1", "0 0 * * 1"),  # the day-of-month is '*': only Mondays, as Vixie cron reads it
    ("*/2,* * * * *", "* * * * *"),
    ("0 0 ?,5 * *", "0 0 * * *"),
])
def test_a_star_in_a_list_is_the_whole_field(expr: str, whole: str) -> None:
    assert local_days(expr) == local_days(whole)


@pytest.mark.parametrize(("expr", "message"), [
    ("0 0 *,61 * *", "day-of-month must be 1-31"),  # the other items of a list with a star are still checked
    ("*,60 * * * *", "minute must be 0-59"),
    ("0 0 *,sat#3 * *", "not a valid cron expression"),
    ("0 0 * * *,9#2", "not a valid cron expression"),
    ("?,5 * * * *", "not a valid cron expression"),  # '?' belongs to the day fields only
    ("0 0 L-L * *", "not a valid cron expression"),
    ("0 0 1 * mon-fri/" + "9" * 5000, "day-of-week step is too large"),  # int() of 5000 digits raises
    ("0 0 " + "1" * 5000 + " * *", "day-of-month must be 1-31"),
    ("61\n* * * *", "minute must be 0-59"),  # the message stays one line
    ("0 0 * * 1\x00", "not a valid cron expression: day-of-week"),
])
def test_unreadable_items_are_refused_in_one_line(expr: str, message: str) -> None:
    with pytest.raises(errors.InvalidInput, match=r"^'.*'( \([0-9,]+ characters\))?: ") as caught:
        expression.check_expression(expr)
    assert message in caught.value.message and "\n" not in caught.value.message
    assert len(caught.value.message) < 400  # a 5,000-character field is quoted clipped (issue 36)


def test_restricted_days_beside_hash_l_and_w_either_match() -> None:
    # POSIX's OR of two restricted day fields holds for the croniter specials too
    assert local_days("0 0 1 * sat#3", 4) == [
        "Sat 2026-01-17 00:00", "Sun 2026-02-01 00:00", "Sat 2026-02-21 00:00", "Sun 2026-03-01 00:00"]
    assert local_days("0 0 15W * 1", 4) == [
        "Mon 2026-01-05 00:00", "Mon 2026-01-12 00:00", "Thu 2026-01-15 00:00", "Mon 2026-01-19 00:00"]
    fridays_or_last = [fire.local.date() for fire in timetable.preview("0 0 L * 5", "UTC", NOW, 6)]
    assert fridays_or_last[-2:] == [date(2026, 1, 30), date(2026, 1, 31)]


def test_the_latest_29_february_slot_is_found() -> None:
    mid_year = datetime(2026, 7, 1, tzinfo=UTC)
    latest = timetable.latest_fire_at_or_before("0 0 29 2 *", "UTC", mid_year)
    assert latest is not None and latest.at == datetime(2024, 2, 29, tzinfo=UTC)
    # across 2100, which is not a leap year, the wait is eight years
    across = timetable.latest_fire_at_or_before("30 6 29 2 *", "Europe/Berlin", datetime(2103, 12, 31, tzinfo=UTC))
    assert across is not None and across.at == datetime(2096, 2, 29, 5, 30, tzinfo=UTC)
    assert timetable.latest_fire_at_or_before("0 0 29 2 *", "UTC", datetime(2024, 2, 29, tzinfo=UTC) - timedelta(
        microseconds=1)) == timetable.latest_fire_at_or_before("0 0 29 2 *", "UTC", datetime(2023, 1, 1, tzinfo=UTC))


ITEM = st.one_of(
    st.sampled_from(["*", "?", "L", "W", "LW", "5W", "L-2", "5L", "#", "1#2", "sat#3", "mon", "JAN", "fri-mon",
                     "jan-dec", "H", "R", "H(1-5)", "*/0", "1/0", "-", "--1", "", "0x1", "²", "٣", "1-", "-1"]),
    st.integers(-2, 100).map(str),
    st.tuples(st.integers(0, 70), st.integers(0, 70)).map(lambda pair: f"{pair[0]}-{pair[1]}"),
    st.tuples(st.sampled_from(["*", "1", "3-9", "mon-fri", "1-1"]), st.integers(0, 80)).map(
        lambda pair: f"{pair[0]}/{pair[1]}"),
    st.text(alphabet="0123456789*,-/#?LWlwHRmonjaMONJA \t\n\x00", max_size=6),
    st.text(alphabet="0123456789", min_size=5, max_size=5000).flatmap(
        lambda digits: st.sampled_from([digits, f"*/{digits}", f"1-{digits}", f"{digits}-1/2"])),
)
FIELD = st.lists(ITEM, min_size=1, max_size=3).map(",".join)
FIVE_FIELDS = st.lists(FIELD, min_size=5, max_size=5).map(" ".join)  # tests/acceptance/test_cron_cli.py too


@settings(max_examples=400, deadline=None)
@given(FIVE_FIELDS)
def test_validate_never_raises_anything_but_invalid_input(expr: str) -> None:
    try:
        result = validate.check(expr, "America/New_York", now=NOW, period=PeriodKind.DAY)
    except errors.InvalidInput as exc:
        assert exc.message and "\n" not in exc.message and "Traceback" not in exc.message
        return
    assert result.runs_per_day > 0 or not result.ok
    spec = ScheduleSpec(name="s", workflow="daily_report", project="p", cron=expr, timezone="Europe/Berlin")
    try:
        validate.check_schedule(spec, PeriodKind.SLOT)
    except errors.ConfigInvalid as exc:
        assert exc.key in ("cron", "timezone", "jitter") and "\n" not in exc.problem
