"""Holidays and maintenance windows (SPEC §18): which slots are not run, and when alerts keep quiet.

Pure: a slot's excuse is a function of the schedule, the windows in force and the slot.
Holiday tables come from the ``holidays`` package, imported on first use only (it costs
~0.2 s, and no fast path of the CLI needs it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from engine.core.models import SlotReason
from engine.core.schedule_spec import Schedule, ScheduleSpec

#: The reasons of slots not run on purpose: not due, not late, not an alert.
EXCUSED = frozenset({SlotReason.HOLIDAY.value, SlotReason.MAINTENANCE.value})


@dataclass(frozen=True)
class MaintenanceWindow:
    """[start, end) in UTC; ``schedules`` empty means every schedule. ``paused``: a ``schedules pause``."""

    start: datetime
    end: datetime
    reason: str
    schedules: tuple[str, ...] = ()
    paused: bool = False

    def covers(self, name: str, at: datetime) -> bool:
        """Whether ``at`` falls inside this window for the schedule ``name``."""
        return self.start <= at < self.end and (not self.schedules or name in self.schedules)


def split_calendar(calendar: str) -> tuple[str, str | None]:
    """``"US-CA"`` as ``("US", "CA")``, ``"KR"`` as ``("KR", None)``."""
    country, _, subdivision = calendar.partition("-")
    return country, subdivision or None


def canonical_calendar(calendar: str) -> str:
    """``calendar`` as the ``holidays`` package spells it (``"us-ca"`` is ``"US-CA"``); ValueError naming what
    is unknown when it is no country, or no subdivision of it, of the package."""
    import holidays

    country, subdivision = split_calendar(calendar)
    supported = holidays.list_supported_countries()
    if country.upper() not in supported:
        raise ValueError(f"unknown country {country!r} (a code of the holidays package, e.g. \"KR\", \"US-CA\")")
    country = country.upper()
    if subdivision is None:
        return country
    spelled = {code.upper(): code for code in supported[country]}
    if subdivision.upper() not in spelled:
        raise ValueError(f"country {country} has no subdivision {subdivision!r}")
    return f"{country}-{spelled[subdivision.upper()]}"


@lru_cache(maxsize=256)
def _public_holidays(calendar: str, year: int) -> dict[date, str]:
    import holidays

    country, subdivision = split_calendar(calendar)
    return dict(holidays.country_holidays(country.upper(), subdiv=subdivision, years=year).items())


def holiday_name(spec: ScheduleSpec, day: date) -> str | None:
    """The name of the holiday ``day`` is for ``spec`` (its own dates first), or None on a working day."""
    if day.isoformat() in spec.holidays:
        return "holiday"
    if spec.calendar is None:
        return None
    return _public_holidays(spec.calendar, day.year).get(day)


def holidays_between(spec: ScheduleSpec, first: date, last: date) -> list[tuple[date, str]]:
    """Every holiday of ``spec`` in [first, last], in date order (the ops report lists them)."""
    found: dict[date, str] = {}
    if spec.calendar is not None:
        for year in range(first.year, last.year + 1):
            found.update((d, n) for d, n in _public_holidays(spec.calendar, year).items() if first <= d <= last)
    for text in spec.holidays:
        day = date.fromisoformat(text)
        if first <= day <= last:
            found.setdefault(day, "holiday")
    return sorted(found.items())


def pause_window(schedule: Schedule) -> MaintenanceWindow | None:
    """A schedule's pause as a window of its own, or None when it was never paused."""
    if schedule.paused_from is None or schedule.paused_until is None:
        return None
    return MaintenanceWindow(schedule.paused_from, schedule.paused_until, schedule.pause_reason or "paused",
                             (schedule.name,), paused=True)


def windows_of(schedule: Schedule, windows: Iterable[MaintenanceWindow]) -> list[MaintenanceWindow]:
    """The windows that apply to ``schedule``: the configured ones naming it (or all) and its pause."""
    mine = [w for w in windows if not w.schedules or schedule.name in w.schedules]
    paused = pause_window(schedule)
    return [*mine, paused] if paused is not None else mine


def window_at(windows: Sequence[MaintenanceWindow], name: str, at: datetime) -> MaintenanceWindow | None:
    """The first window covering ``at`` for schedule ``name``, if any."""
    return next((w for w in windows if w.covers(name, at)), None)


def quiet(schedule: Schedule, maintenance: Sequence[MaintenanceWindow], now: datetime) -> bool:
    """Whether ``schedule`` is inside a maintenance window (configured, or its pause) at ``now``: no
    ``run_late``, ``silent`` or ``run_stuck`` is raised for it then."""
    return window_at(windows_of(schedule, maintenance), schedule.name, now) is not None


def excuse(spec: ScheduleSpec, windows: Sequence[MaintenanceWindow], slot_at: datetime) -> SlotReason | None:
    """Why the slot at ``slot_at`` is not run: ``maintenance`` (a window covers it), ``holiday`` (its local
    date is one), or None."""
    if window_at(windows, spec.name, slot_at) is not None:
        return SlotReason.MAINTENANCE
    if (spec.calendar is not None or spec.holidays) and \
            holiday_name(spec, slot_at.astimezone(ZoneInfo(spec.timezone)).date()) is not None:
        return SlotReason.HOLIDAY
    return None
