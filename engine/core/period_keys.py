"""Business keys: the one spelling of a period's key, and its reading back.

A day is ``2026-04-08``, an ISO week ``2026-W15``, a month ``2026-04``, a quarter
``2026-Q2``, a sprint ``2026-S07`` (the seventh sprint starting in 2026), a slot its UTC minute
``2026-04-08T19:30Z``. Each sorts as text within its kind, and a run's period
is read from its key alone, without the workflow's code (prune, bulk actions,
the calendar, the runs filter); a sprint's, with its schedule's ``Sprint``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from engine.core.models import PeriodKind
from engine.core.schedule_spec import Sprint

_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_WEEK = re.compile(r"([0-9]{4})-W([0-9]{2})")
_SLOT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z")
_MONTH = re.compile(r"([0-9]{4})-(0[1-9]|1[0-2])")
_QUARTER = re.compile(r"([0-9]{4})-Q([1-4])")
_SPRINT = re.compile(r"([0-9]{4})-S([0-9]{2})")
SPRINT_LIKE = "____-S__"
WEEK_LIKE = "____-W__"  # a week's key as a SQL LIKE pattern (no day or slot key matches it)
QUARTER_LIKE = "____-Q_"
MONTH_LIKE = "____-__"  # a month's key, and a quarter's: tell them apart with QUARTER_LIKE


@dataclass(frozen=True)
class PeriodKey:
    """A business key read back: its kind and where its period starts."""

    kind: PeriodKind
    day: date  # the day; an ISO week's Monday; a month's or a quarter's first day; a slot's UTC date
    slot_at: datetime | None = None  # a slot's instant, UTC, to the minute


def format(kind: PeriodKind, value: date | datetime,  # shadows the builtin: called as period_keys.format
           sprint: Sprint | None = None) -> str:
    """The business key of the ``kind`` period starting at (or, for a week, holding) ``value``.

    A day or week takes a ``date``; a slot takes an aware instant, kept to the minute in UTC; a sprint, its
    schedule's ``sprint`` too.
    """
    if kind is PeriodKind.SLOT:
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise ValueError(f"a slot key needs an aware instant, not {value!r}")
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="minutes") + "Z"
    if isinstance(value, datetime):
        raise ValueError(f"a {kind.value} key takes a date, not the instant {value!r}")
    if kind is PeriodKind.DAY:
        return value.isoformat()
    if kind is PeriodKind.MONTH:
        return f"{value.year:04d}-{value.month:02d}"
    if kind is PeriodKind.QUARTER:
        return f"{value.year:04d}-Q{(value.month - 1) // 3 + 1}"
    if kind is PeriodKind.SPRINT:
        first, every = span(kind, value, sprint)[0], _sprint(sprint)
        return f"{first.year:04d}-S{(first - _first_sprint(first.year, every)).days // every.days + 1:02d}"
    year, week, _ = value.isocalendar()
    return f"{year:04d}-W{week:02d}"


def _sprint(sprint: Sprint | None) -> Sprint:
    if sprint is None:
        raise ValueError("a sprint period needs its schedule's sprint (length and anchor)")
    return sprint


def _first_sprint(year: int, sprint: Sprint) -> date:
    """The first sprint starting on or after 1 January of ``year``."""
    behind = (date(year, 1, 1) - sprint.anchor).days
    return sprint.anchor + timedelta(days=-(-behind // sprint.days) * sprint.days)


def span(kind: PeriodKind, day: date, sprint: Sprint | None = None) -> tuple[date, date]:
    """The first date of the ``kind`` period holding ``day`` and the first date after it (a slot: ``day``'s)."""
    if kind is PeriodKind.SPRINT:
        every = _sprint(sprint)
        first = every.anchor + timedelta(days=(day - every.anchor).days // every.days * every.days)
        return first, first + timedelta(days=every.days)
    if kind is PeriodKind.WEEK:
        monday = day - timedelta(days=day.weekday())
        return monday, monday + timedelta(days=7)
    if kind in (PeriodKind.MONTH, PeriodKind.QUARTER):
        months = 1 if kind is PeriodKind.MONTH else 3
        first = date(day.year, day.month - (day.month - 1) % months, 1)
        after = first.month - 1 + months  # months since January of the first day's year
        return first, date(first.year + after // 12, after % 12 + 1, 1)
    return day, day + timedelta(days=1)


def parse(key: str, sprint: Sprint | None = None) -> PeriodKey:
    """The kind and start of business key ``key``; raises ValueError for any other text, and for a sprint's
    without its schedule's ``sprint``.

    ``format(k.kind, k.slot_at or k.day, sprint) == key`` for every key it accepts.
    """
    if _DAY.fullmatch(key):
        return PeriodKey(PeriodKind.DAY, date.fromisoformat(key))
    if week := _WEEK.fullmatch(key):
        return PeriodKey(PeriodKind.WEEK, date.fromisocalendar(int(week.group(1)), int(week.group(2)), 1))
    if month := _MONTH.fullmatch(key):
        return PeriodKey(PeriodKind.MONTH, date(int(month.group(1)), int(month.group(2)), 1))
    if quarter := _QUARTER.fullmatch(key):
        return PeriodKey(PeriodKind.QUARTER, date(int(quarter.group(1)), 3 * int(quarter.group(2)) - 2, 1))
    if numbered := _SPRINT.fullmatch(key):
        every, year = _sprint(sprint), int(numbered.group(1))
        first = _first_sprint(year, every) + timedelta(days=(int(numbered.group(2)) - 1) * every.days)
        if int(numbered.group(2)) < 1 or first.year != year:
            raise ValueError(f"business key {key!r}: {year} has no sprint {int(numbered.group(2))}")
        return PeriodKey(PeriodKind.SPRINT, first)
    if _SLOT.fullmatch(key):
        at = datetime.fromisoformat(key)
        return PeriodKey(PeriodKind.SLOT, at.date(), at)
    raise ValueError(f"business key {key!r} has no known period shape")

