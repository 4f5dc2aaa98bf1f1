"""Business keys: one spelling, read back exactly (``core.period_keys``)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core import period_keys, policies
from engine.core.models import PeriodKind, ReportOn

days = st.dates(min_value=date(1, 1, 8), max_value=date(9999, 12, 24))
instants = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                        timezones=st.sampled_from([UTC, timezone(timedelta(hours=9)), timezone(timedelta(hours=-5))]))


@pytest.mark.parametrize(("kind", "value", "key"), [
    (PeriodKind.DAY, date(2026, 4, 8), "2026-04-08"),
    (PeriodKind.WEEK, date(2026, 4, 8), "2026-W15"),
    (PeriodKind.WEEK, date(2027, 1, 1), "2026-W53"),  # a Friday: its ISO week is the old year's
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


@given(instants)
def test_a_slot_key_reads_back_as_its_utc_minute(at: datetime) -> None:
    key = period_keys.parse(period_keys.format(PeriodKind.SLOT, at))
    minute = at.astimezone(UTC).replace(second=0, microsecond=0)
    assert (key.kind, key.slot_at, key.day) == (PeriodKind.SLOT, minute, minute.date())


@given(st.one_of(days.map(lambda d: (PeriodKind.DAY, d)), days.map(lambda d: (PeriodKind.WEEK, d)),
                 instants.map(lambda a: (PeriodKind.SLOT, a))))
def test_every_key_parse_accepts_is_spelled_back_the_same(kind_value: tuple[PeriodKind, date]) -> None:
    key = period_keys.format(*kind_value)
    parsed = period_keys.parse(key)
    assert period_keys.format(parsed.kind, parsed.slot_at or parsed.day) == key


@given(st.text(alphabet="0123456789-WTZ:", max_size=17))
def test_any_other_text_is_refused_or_spelled_back_the_same(text: str) -> None:
    try:
        parsed = period_keys.parse(text)
    except ValueError:
        return
    assert period_keys.format(parsed.kind, parsed.slot_at or parsed.day) == text


@pytest.mark.parametrize("text", ["2026-4-8", "2026-W5", "2026-W54", "2026-02-30", "2026-04-08T19:30",
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
    assert [policies.business_period(kind, slot, "Asia/Seoul", ReportOn.CURRENT).key for kind in PeriodKind] == [
        "2026-04-08", "2026-W15", "2026-04-08T10:00Z"]
