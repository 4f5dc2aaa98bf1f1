"""The parsers of what an operator types (``engine.core.inputs``): run ids, dates and instants,
as the CLI and the web share them. Whatever the text, each returns a usable value or raises
``InvalidInput``; nothing else escapes (no ValueError, OverflowError or TypeError)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import durations
from engine.core import clock, errors, inputs

NEAR_DATES = st.from_regex(r"\A[0-9١²]{1,5}-[0-9]{1,2}-[0-9]{1,2}\Z") | st.dates().map(lambda d: d.isoformat())
NEAR_INSTANTS = (st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat())
                 | st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?(Z|[+-][0-9]{2}:[0-9]{2})?\Z"))
ANY_TEXT = st.text(max_size=40)


@settings(deadline=None)  # a loaded machine; the property is what counts
@given(ANY_TEXT | st.from_regex(r"\A[0-9]{1,25}\Z") | st.sampled_from(["²", "١", "٣٤", "𝟙", "0", "-1", " 1"]))
def test_a_run_id_is_ascii_digits_or_invalid_input(text: str) -> None:
    try:
        value = inputs.run_id(text)
    except errors.InvalidInput as exc:
        assert "\n" not in exc.message
        return
    assert text.isascii() and str(value) == text.lstrip("0") and 0 < value < 10**18


@settings(deadline=None)  # a loaded machine; the property is what counts
@given(ANY_TEXT | NEAR_DATES)
def test_a_date_is_usable_in_period_arithmetic_or_invalid_input(text: str) -> None:
    try:
        day = inputs.day(text, "--date")
    except errors.InvalidInput as exc:
        assert "\n" not in exc.message
        return
    assert day - timedelta(days=400) < day + timedelta(days=400)  # a period of any kind around it fits


@settings(deadline=None)  # a loaded machine; the property is what counts
@given(ANY_TEXT | NEAR_INSTANTS, st.sampled_from(["Pacific/Kiritimati", "Pacific/Pago_Pago", "UTC"]))
def test_an_instant_and_the_now_option_are_usable_or_invalid_input(text: str, zone: str) -> None:
    try:
        at = inputs.instant(text)
        clock.clock_from_spec(text).now()
        clock.clock_from_spec(f"{text}@1700000000").now()
    except errors.InvalidInput as exc:
        assert "\n" not in exc.message
        return
    assert (at + timedelta(days=400)).astimezone(ZoneInfo(zone)) > (at - timedelta(days=400)).astimezone(ZoneInfo(zone))


@pytest.mark.parametrize("text", ["9999-12-31", "0001-01-01", "9999-12-25T00:00:00Z", "0001-01-01T00:00:00+01:00"])
def test_the_edges_of_the_calendar_are_refused(text: str) -> None:
    with pytest.raises(errors.InvalidInput, match="out of range"):
        inputs.instant(text) if "T" in text else inputs.day(text, "--date")


@settings(deadline=None)  # a loaded machine; the property is what counts
@given(ANY_TEXT | st.from_regex(r"\A[0-9١]{1,30}(\.[0-9]{1,12})?\s?(ms|s|m|h|d|w)\Z")
       | st.integers(min_value=-10**30, max_value=10**400) | st.floats(allow_nan=True))
def test_a_duration_is_usable_or_a_value_error_the_cli_turns_into_invalid_input(value: object) -> None:
    try:
        span = durations.parse(value)
    except ValueError:
        return
    assert datetime(9000, 12, 31, tzinfo=UTC) + span > datetime(1900, 1, 1, tzinfo=UTC) - span
