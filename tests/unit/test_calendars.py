"""Holidays and maintenance windows, the pure part (SPEC §18): which slot is excused, and why."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from engine.config import config_file
from engine.core import calendars, errors
from engine.core.models import SlotReason
from engine.core.schedule_spec import Schedule, ScheduleSpec
from engine.plugins.workflow_registry import load_registry

SPEC = ScheduleSpec(name="kr", workflow="echo", project="p", cron="0 9 * * *", timezone="Asia/Seoul",
                    calendar="KR", holidays=("2026-10-08",))


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 10, day, hour, tzinfo=UTC)


def test_a_holiday_is_judged_by_the_slots_local_date() -> None:
    # 09:00 in Seoul on Friday 2026-10-09 (Hangul Day) is 00:00 UTC the same day; 23:30 UTC on the 8th is
    # 08:30 in Seoul on the 9th: a holiday too, though its UTC date is the 8th's.
    assert calendars.excuse(SPEC, (), at(9)) is SlotReason.HOLIDAY
    assert calendars.excuse(SPEC, (), datetime(2026, 10, 8, 23, 30, tzinfo=UTC)) is SlotReason.HOLIDAY
    assert calendars.excuse(SPEC, (), at(7)) is None
    assert calendars.excuse(SPEC, (), at(8)) is SlotReason.HOLIDAY  # a date of its own
    assert calendars.holiday_name(SPEC, date(2026, 10, 9)) == "Hangul Day"


def test_a_subdivision_has_its_own_holidays() -> None:
    california = ScheduleSpec(name="ca", workflow="echo", project="p", cron="0 9 * * *",
                              timezone="America/Los_Angeles", calendar="US-CA")
    new_york = ScheduleSpec(name="ny", workflow="echo", project="p", cron="0 9 * * *",
                            timezone="America/New_York", calendar="US-NY")
    assert calendars.holiday_name(california, date(2026, 3, 31)) == "Cesar Chavez Day"
    assert calendars.holiday_name(new_york, date(2026, 3, 31)) is None


def test_a_window_wins_over_a_holiday_and_covers_only_its_schedules() -> None:
    window = calendars.MaintenanceWindow(at(9) - timedelta(hours=1), at(9) + timedelta(hours=1), "upgrade", ("kr",))
    assert calendars.excuse(SPEC, (window,), at(9)) is SlotReason.MAINTENANCE
    assert not window.covers("other", at(9))
    assert not window.covers("kr", at(9) + timedelta(hours=1))  # [start, end)


def test_a_pause_is_a_window_of_its_schedule_alone() -> None:
    schedule = Schedule(id=1, spec=SPEC, version=2, enabled=True, archived=False, next_run_at=None,
                        paused_from=at(1), paused_until=at(3), pause_reason="repo move")
    everyone = calendars.MaintenanceWindow(at(5), at(6), "network")
    other = calendars.MaintenanceWindow(at(1), at(9), "not ours", ("other",))
    assert calendars.windows_of(schedule, (everyone, other)) == [
        everyone, calendars.MaintenanceWindow(at(1), at(3), "repo move", ("kr",), paused=True)]
    assert calendars.quiet(schedule, (everyone, other), at(2)) and calendars.quiet(schedule, (everyone,), at(5))
    assert not calendars.quiet(schedule, (everyone, other), at(4))


def test_holidays_between_lists_the_package_s_and_one_s_own_in_date_order() -> None:
    got = calendars.holidays_between(SPEC, date(2026, 10, 1), date(2026, 10, 9))
    assert [d.isoformat() for d, _ in got] == ["2026-10-03", "2026-10-05", "2026-10-08", "2026-10-09"]


def _build(raw: dict[str, object]) -> config_file.AppConfig:
    return config_file.build_config(raw, path=Path("/nonexistent/reportflow.toml"), registry=load_registry())


def test_a_calendar_is_stored_as_the_package_spells_it() -> None:
    assert calendars.canonical_calendar("us-ca") == "US-CA" and calendars.canonical_calendar("kr") == "KR"
    with pytest.raises(ValueError, match="country US has no subdivision 'ZZ'"):
        calendars.canonical_calendar("US-ZZ")


def test_a_schedule_names_a_calendars_entry_and_adds_dates_of_its_own() -> None:
    cfg = _build({"calendars": [{"name": "seoul-office", "calendar": {"country": "kr"},
                                 "holidays": [date(2026, 12, 31)]}],
                  "schedules": [dict(name="kr", workflow="echo", project="p", cron="0 9 * * *",
                                     timezone="Asia/Seoul", calendar="seoul-office", holidays=["2026-10-08"])]})
    (spec,) = cfg.schedules
    assert (spec.calendar, spec.holidays) == ("KR", ("2026-10-08", "2026-12-31"))


@pytest.mark.parametrize(("raw", "key"), [
    ({"calendars": [{"name": "x", "calendar": "ZZ"}]}, "calendars[0].calendar"),
    ({"calendars": [{"name": "x"}, {"name": "x"}]}, "calendars[1].name"),
    ({"maintenance": [{"start": "2026-10-10T01:00:00Z", "end": "2026-10-10T02:00:00Z"}]}, "maintenance[0].reason"),
])
def test_a_bad_calendar_or_window_names_its_key(raw: dict[str, object], key: str) -> None:
    with pytest.raises(errors.ConfigInvalid) as caught:
        _build(raw)
    assert caught.value.key == key
