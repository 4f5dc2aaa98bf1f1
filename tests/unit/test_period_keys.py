"""Business keys: one spelling, read back exactly (``core.period_keys``)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core import period_keys, policies
from engine.core.models import PeriodKind
from engine.core.schedule_spec import ReportOn, Sprint

days = st.dates(min_value=date(1, 1, 8), max_value=date(9999, 12, 24))
instants = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                        timezones=st.sampled_from([UTC, timezone(timedelta(hours=9)), timezone(timedelta(hours=-5))]))


@pytest.mark.parametrize(("kind", "value", "key"), [
    (PeriodKind.DAY, date(2026, 4, 8), "2026-04-08"),
    (PeriodKind.WEEK, date(2026, 4, 8), "2026-W15"),
    (PeriodKind.WEEK, date(2027, 1, 1), "2026-W53"),  # a Friday: its ISO week is the old year's
    (PeriodKind.MONTH, date(2026, 4, 8), "2026-04"),
    (PeriodKind.MONTH, date(2026, 12, 31), "2026-12"),
    (PeriodKind.QUARTER, date(2026, 4, 8), "2026-Q2"),
    (PeriodKind.QUARTER, date(2026, 12, 31), "2026-Q4"),
    (PeriodKind.QUARTER, date(2027, 1, 1), "2027-Q1"),
    (PeriodKind.SLOT, datetime(2026, 4, 9, 4, 30, 59, tzinfo=timezone(timedelta(hours=9))), "2026-04-08T19:30Z"),
])
def test_each_kind_is_spelled_as_documented(kind: PeriodKind, value: date, key: str) -> None:
    assert period_keys.format(kind, value) == key


@given(days)
def test_a_day_key_reads_back_as_its_day(day: date) -> None:
    assert period_keys.parse(period_keys.format(PeriodKind.DAY, day)) == period_keys.PeriodKey(PeriodKind.DAY, day)


@given(days)
def test_a_week_key_reads_back_as_its_monday(day: date) -> None:
    key = period_keys.parse(period_keys.format(PeriodKind.WEEK, day))
    assert key.kind is PeriodKind.WEEK and key.day.weekday() == 0 and 0 <= (day - key.day).days < 7


@given(days, st.sampled_from([PeriodKind.DAY, PeriodKind.WEEK, PeriodKind.MONTH, PeriodKind.QUARTER]))
def test_a_period_key_reads_back_as_its_first_day_and_its_span_holds_the_day(day: date, kind: PeriodKind) -> None:
    key = period_keys.parse(period_keys.format(kind, day))
    first, after = period_keys.span(kind, day)
    assert key.kind is kind and key.day == first and first <= day < after
    assert period_keys.format(kind, after - timedelta(days=1)) == period_keys.format(kind, day)  # one period
    assert period_keys.format(kind, after) != period_keys.format(kind, day)  # the next one


def test_months_and_quarters_span_their_calendar_days() -> None:
    assert period_keys.span(PeriodKind.MONTH, date(2028, 2, 10)) == (date(2028, 2, 1), date(2028, 3, 1))  # leap
    assert period_keys.span(PeriodKind.MONTH, date(2026, 12, 31)) == (date(2026, 12, 1), date(2027, 1, 1))
    assert period_keys.span(PeriodKind.QUARTER, date(2026, 11, 5)) == (date(2026, 10, 1), date(2027, 1, 1))
    assert period_keys.span(PeriodKind.QUARTER, date(2026, 3, 31)) == (date(2026, 1, 1), date(2026, 4, 1))


@given(instants)
def test_a_slot_key_reads_back_as_its_utc_minute(at: datetime) -> None:
    key = period_keys.parse(period_keys.format(PeriodKind.SLOT, at))
    minute = at.astimezone(UTC).replace(second=0, microsecond=0)
    assert (key.kind, key.slot_at, key.day) == (PeriodKind.SLOT, minute, minute.date())


@given(st.one_of(days.map(lambda d: (PeriodKind.DAY, d)), days.map(lambda d: (PeriodKind.WEEK, d)),
                 days.map(lambda d: (PeriodKind.MONTH, d)), days.map(lambda d: (PeriodKind.QUARTER, d)),
                 instants.map(lambda a: (PeriodKind.SLOT, a))))
def test_every_key_parse_accepts_is_spelled_back_the_same(kind_value: tuple[PeriodKind, date]) -> None:
    key = period_keys.format(*kind_value)
    parsed = period_keys.parse(key)
    assert period_keys.format(parsed.kind, parsed.slot_at or parsed.day) == key


@given(st.text(alphabet="0123456789-WQTZ:", max_size=17))
def test_any_other_text_is_refused_or_spelled_back_the_same(text: str) -> None:
    try:
        parsed = period_keys.parse(text)
    except ValueError:
        return
    assert period_keys.format(parsed.kind, parsed.slot_at or parsed.day) == text


@pytest.mark.parametrize("text", ["2026-4-8", "2026-W5", "2026-W54", "2026-02-30", "2026-04-08T19:30", "2026-13",
                                  "2026-00", "2026-Q5", "2026-Q0", "2026-4",
                                  "2026-04-08T19:30:00Z", "٢٠٢٦-04-08", "daily"])
def test_what_is_not_a_key_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        period_keys.parse(text)


def test_the_wrong_value_for_a_kind_is_refused() -> None:
    with pytest.raises(ValueError):
        period_keys.format(PeriodKind.DAY, datetime(2026, 4, 8, tzinfo=UTC))
    with pytest.raises(ValueError):
        period_keys.format(PeriodKind.SLOT, date(2026, 4, 8))


def test_business_periods_are_keyed_by_the_formatter() -> None:
    slot = datetime(2026, 4, 8, 10, 0, tzinfo=UTC)
    sprint = Sprint(date(2026, 1, 5), 14)
    assert [policies.business_period(kind, slot, "Asia/Seoul", ReportOn.CURRENT, sprint).key
            for kind in PeriodKind] == ["2026-04-08", "2026-W15", "2026-04", "2026-Q2", "2026-S07", "2026-04-08T10:00Z"]


SPRINT = Sprint(date(2026, 1, 5), 14)  # the example: 2026-S23 is the sprint of mid-November


@pytest.mark.parametrize(("day", "key", "first", "after"), [
    (date(2026, 1, 5), "2026-S01", date(2026, 1, 5), date(2026, 1, 19)),
    (date(2026, 1, 18), "2026-S01", date(2026, 1, 5), date(2026, 1, 19)),
    (date(2026, 1, 19), "2026-S02", date(2026, 1, 19), date(2026, 2, 2)),
    (date(2026, 11, 15), "2026-S23", date(2026, 11, 9), date(2026, 11, 23)),
    (date(2026, 1, 2), "2025-S26", date(2025, 12, 22), date(2026, 1, 5)),  # a sprint is its start's year's
    (date(2024, 6, 1), "2024-S11", date(2024, 5, 27), date(2024, 6, 10)),  # before the anchor, the same cadence
])
def test_a_sprint_is_numbered_within_the_year_it_starts_in(day: date, key: str, first: date, after: date) -> None:
    assert period_keys.format(PeriodKind.SPRINT, day, SPRINT) == key
    assert period_keys.span(PeriodKind.SPRINT, day, SPRINT) == (first, after)
    assert period_keys.parse(key, SPRINT) == period_keys.PeriodKey(PeriodKind.SPRINT, first)


@given(days)
def test_every_sprint_key_reads_back_and_sorts_by_time(day: date) -> None:
    key = period_keys.format(PeriodKind.SPRINT, day, SPRINT)
    first, after = period_keys.span(PeriodKind.SPRINT, day, SPRINT)
    assert period_keys.parse(key, SPRINT).day == first and (after - first).days == 14
    assert period_keys.format(PeriodKind.SPRINT, after, SPRINT) > key  # the next sprint sorts after it


def test_a_sprint_key_needs_its_sprint_and_a_number_the_year_has() -> None:
    with pytest.raises(ValueError, match="needs its schedule's sprint"):
        period_keys.parse("2026-S23")
    with pytest.raises(ValueError, match="no sprint 27"):
        period_keys.parse("2026-S27", SPRINT)
    with pytest.raises(ValueError, match="no sprint 0"):
        period_keys.parse("2026-S00", SPRINT)


SEOUL = "Asia/Seoul"


@pytest.mark.parametrize(("kind", "slot", "report_on", "key"), [
    # A monthly on the 1st at 09:00 local reports on the month that ended (previous or interval)...
    (PeriodKind.MONTH, datetime(2026, 12, 1, 0, 0, tzinfo=UTC), ReportOn.PREVIOUS, "2026-11"),
    (PeriodKind.MONTH, datetime(2026, 12, 1, 0, 0, tzinfo=UTC), ReportOn.CURRENT, "2026-12"),
    # ... and one at local midnight of the 1st, by interval, on the month its window ends in.
    (PeriodKind.MONTH, datetime(2026, 11, 30, 15, 0, tzinfo=UTC), ReportOn.INTERVAL, "2026-11"),
    (PeriodKind.MONTH, datetime(2026, 3, 1, 0, 0, tzinfo=UTC), ReportOn.PREVIOUS, "2026-02"),
    (PeriodKind.QUARTER, datetime(2027, 1, 1, 0, 0, tzinfo=UTC), ReportOn.PREVIOUS, "2026-Q4"),
    (PeriodKind.QUARTER, datetime(2026, 12, 31, 15, 0, tzinfo=UTC), ReportOn.INTERVAL, "2026-Q4"),
    (PeriodKind.QUARTER, datetime(2026, 7, 1, 0, 0, tzinfo=UTC), ReportOn.CURRENT, "2026-Q3"),
])
def test_a_month_or_quarter_report_on_rules(kind: PeriodKind, slot: datetime, report_on: ReportOn, key: str) -> None:
    period = policies.business_period(kind, slot, SEOUL, report_on)
    assert period.key == key
    first = period_keys.parse(key).day
    assert period.start_at == datetime(first.year, first.month, 1, tzinfo=UTC) - timedelta(hours=9)  # local midnight


def test_the_slot_dates_of_a_month_and_a_quarter() -> None:
    assert policies.slot_dates_for_period(PeriodKind.MONTH, date(2026, 11, 5), ReportOn.CURRENT) == (
        date(2026, 11, 1), date(2026, 11, 30))
    assert policies.slot_dates_for_period(PeriodKind.MONTH, date(2026, 11, 5), ReportOn.PREVIOUS) == (
        date(2026, 12, 1), date(2026, 12, 31))
    assert policies.slot_dates_for_period(PeriodKind.QUARTER, date(2026, 11, 5), ReportOn.PREVIOUS) == (
        date(2027, 1, 1), date(2027, 3, 31))
    assert policies.slot_dates_for_period(PeriodKind.MONTH, date(2026, 11, 5), ReportOn.INTERVAL) == (
        date(2026, 11, 1), date(2026, 12, 1))
