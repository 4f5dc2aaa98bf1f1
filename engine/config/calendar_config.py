"""``[[calendars]]``, a schedule's ``calendar`` / ``holidays``, and ``[[maintenance]]`` (SPEC §18).

A schedule's ``calendar`` is a country of the ``holidays`` package with an optional subdivision
(``"KR"``, ``"US-CA"``, or ``{ country = "US", subdivision = "CA" }``) or the name of a
``[[calendars]]`` entry; it is resolved here, so a stored definition holds the country and the
dates themselves. Checked at load, before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timezone
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.core import calendars, errors

CALENDAR_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class CalendarTable(BaseModel):
    """``calendar = { country = "US", subdivision = "CA" }``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    country: Annotated[str, Field(pattern=r"^[A-Za-z]{2,3}$")]
    subdivision: Annotated[str, Field(pattern=r"^[A-Za-z0-9]{1,10}$")] | None = None

    def code(self) -> str:
        """As one string: ``"US-CA"``."""
        return f"{self.country}-{self.subdivision}" if self.subdivision else self.country


CalendarValue = Annotated[str, Field(min_length=1, max_length=100)] | CalendarTable


class CalendarEntry(BaseModel):
    """One ``[[calendars]]`` entry: a country (optional) and dates of one's own, under a name schedules use."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=CALENDAR_NAME, max_length=100)]
    calendar: CalendarValue | None = None
    holidays: list[date] = []


class MaintenanceEntry(BaseModel):
    """One ``[[maintenance]]`` entry: [start, end), for the schedules named (none: all)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: datetime
    end: datetime
    schedules: list[str] = []
    reason: Annotated[str, Field(min_length=1, max_length=500)]

    @field_validator("start", "end")
    @classmethod
    def _with_zone(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("must say its timezone, e.g. 2026-10-10T01:00:00+09:00")
        return value.astimezone(timezone.utc)


def _code(value: str | CalendarTable, where: str, file: str | None) -> str:
    code = value.code() if isinstance(value, CalendarTable) else value
    try:
        return calendars.canonical_calendar(code)
    except ValueError as exc:
        raise errors.ConfigInvalid(str(exc), file=file, key=where) from exc


def check_entries(entries: Sequence[CalendarEntry], file: str | None) -> dict[str, CalendarEntry]:
    """The ``[[calendars]]`` entries by name; a duplicate name or an unknown country raises ConfigInvalid."""
    named: dict[str, CalendarEntry] = {}
    for index, entry in enumerate(entries):
        if entry.name in named:
            raise errors.ConfigInvalid(f"duplicate calendar name '{entry.name}'", file=file,
                                       key=f"calendars[{index}].name")
        if entry.calendar is not None:
            _code(entry.calendar, f"calendars[{index}].calendar", file)
        named[entry.name] = entry
    return named


def resolve(calendar: str | CalendarTable | None, own: Sequence[date], named: Mapping[str, CalendarEntry],
            where: str, file: str | None) -> tuple[str | None, tuple[str, ...]]:
    """A schedule's ``calendar`` and ``holidays`` as its definition stores them: a country code or None,
    and every date of its own (the named calendar's and the schedule's), sorted."""
    dates = set(own)
    code = None
    if isinstance(calendar, str) and calendar in named:
        entry = named[calendar]
        dates.update(entry.holidays)
        code = None if entry.calendar is None else _code(entry.calendar, f"{where}.calendar", file)
    elif calendar is not None:
        code = _code(calendar, f"{where}.calendar", file)
    return code, tuple(sorted(d.isoformat() for d in dates))


def windows(entries: Sequence[MaintenanceEntry], schedule_names: Sequence[str],
            file: str | None) -> tuple[calendars.MaintenanceWindow, ...]:
    """The ``[[maintenance]]`` entries as windows; an empty one or an unknown schedule raises ConfigInvalid."""
    out = []
    for index, entry in enumerate(entries):
        if entry.end <= entry.start:
            raise errors.ConfigInvalid("must be after start", file=file, key=f"maintenance[{index}].end")
        for name in entry.schedules:
            if name not in schedule_names:
                raise errors.ConfigInvalid(f"no schedule named '{name}'", file=file,
                                           key=f"maintenance[{index}].schedules")
        out.append(calendars.MaintenanceWindow(entry.start, entry.end, entry.reason, tuple(entry.schedules)))
    return tuple(out)
