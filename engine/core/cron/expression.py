"""A cron expression read and checked: its fire times within a day and the local days it matches.

Expressions are 5-field crons (or an @alias), read as POSIX cron reads them (``cron.fields``: N-N,
list stars, ``?``); croniter judges the rest of the syntax and finds the days of L, W and #, and
this module owns day matching (the OR of restricted day fields). Pure: no I/O and no clock.
"""

from __future__ import annotations

import functools
import heapq
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from itertools import groupby, takewhile
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadDateError, CroniterError, croniter

from engine.core import errors, redact
from engine.core.cron import fields

DAY = timedelta(days=1)
MAX_IDLE_DAYS = 8 * 366 + 31  # Feb 29 skips 2100: a cron may wait 8 years, never longer, between days
ALIASES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
           "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


@dataclass(frozen=True)
class Parsed:
    """A validated expression: fire times of a day plus a day filter."""

    times: tuple[timedelta, ...]  # offsets from local midnight, ascending
    months: frozenset[int] | None  # None: every value
    doms: frozenset[int] | None
    dows: frozenset[int] | None  # 0 = Sunday
    # L, W or # in the day fields: croniter iterates the days, one iterator per restricted day field
    # (POSIX's OR of two restricted day fields; croniter alone would ignore the day-of-month beside a #)
    special: tuple[croniter, ...]
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False)


@functools.lru_cache(maxsize=1024)
def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; InvalidInput for an unknown name, "" or "localtime" (the server's zone)."""
    try:
        if name.strip() != name or name.lower() in ("", "localtime"):
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        import difflib  # only on this error path: the CLI's fast start imports this module

        zones = sorted(available_timezones() - {"localtime", "Factory"})
        close = difflib.get_close_matches(name.strip(), zones, n=1, cutoff=0.75)
        hint = f"did you mean {close[0]}?" if close else "use an IANA name such as Asia/Seoul"
        raise errors.InvalidInput(f"unknown timezone '{name}' ({hint})") from exc


def check_expression(expr: str) -> None:
    """Raise InvalidInput naming the field at fault unless ``expr`` is a usable 5-field cron."""
    parse(expr)


@functools.lru_cache(maxsize=4096)
def parse(expr: str) -> Parsed:
    """``expr`` read and checked (cached per expression); InvalidInput naming the field at fault."""
    # Building croniter objects costs ~0.3 ms (SPEC §11): parse once per expression.
    # repr: a newline or NUL in the input stays on one line; echoed: a huge one is quoted clipped
    quoted, text = redact.echoed(expr), expr.strip()
    if not text:
        raise errors.InvalidInput("cron expression is empty (e.g. '30 19 * * *')")
    if text.startswith("@"):
        if text.lower() not in ALIASES:
            raise errors.InvalidInput(f"{quoted}: unknown alias (use @hourly, @daily, @weekly, @monthly or @yearly)")
        text = ALIASES[text.lower()]
    written = text.split()
    if len(written) != 5:
        extra = "; seconds and years are not supported" if len(written) in (6, 7) else ""
        raise errors.InvalidInput(
            f"{quoted}: expected 5 fields (minute hour day-of-month month day-of-week), got {len(written)}{extra}")
    reading = fields.read(quoted, written)
    try:
        if reading.as_written != reading.fields:  # a list star hides items croniter must still accept
            croniter.expand(" ".join(reading.as_written))
        expanded, nth = croniter.expand(" ".join(reading.fields))
        minutes, hours, doms, months, dows = (None if values == ["*"] else values for values in expanded)
        dom, month, dow = reading.fields[2:]
        special: tuple[croniter, ...] = ()
        if nth or (doms is not None and not all(isinstance(v, int) for v in doms)) or "w" in dom.lower():
            sides = [f"{dom} {month} *", f"* {month} {dow}"] if "*" not in (dom, dow) else [f"{dom} {month} {dow}"]
            special = tuple(croniter(f"0 0 {side}", datetime(2000, 1, 1), max_years_between_matches=9)
                            for side in sides)
    except CroniterError as exc:
        detail = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise errors.InvalidInput(f"{quoted}: not a valid cron expression: {_culprit(reading)} ({detail})") from exc
    parsed = Parsed(
        times=tuple(sorted(timedelta(hours=int(h), minutes=int(m))
                           for h in (hours or range(24)) for m in (minutes or range(60)))),
        months=None if months is None else frozenset(int(v) for v in months),
        doms=None if doms is None or special else frozenset(int(v) for v in doms),
        dows=None if dows is None else frozenset(int(v) % 7 for v in dows),
        special=special)
    if next(matching_days(parsed, date(2000, 1, 1)), None) is None:
        raise errors.InvalidInput(f"{quoted}: never fires (no date matches its day-of-month, month and day-of-week)")
    return parsed


def _culprit(reading: fields.Reading) -> str:
    """The first field croniter refuses on its own (every other field ``*``), as "name 'value'"."""
    for index, ((name, _, _), value) in enumerate(zip(fields.FIELDS, reading.as_written, strict=True)):
        alone = ["*"] * 5
        alone[index] = value
        try:
            croniter.expand(" ".join(alone))
        except CroniterError:
            return f"{name} '{value}'"
    return "the day fields together"  # each field reads, their combination does not


def matching_days(parsed: Parsed, first: date) -> Iterator[date]:
    """Local dates on or after ``first`` whose day fields match, ascending (ends after 8 idle years)."""
    if parsed.special:
        days = heapq.merge(*(_special_days(parsed.lock, side, first) for side in parsed.special))
        yield from (day for day, _ in groupby(days))
        return
    day, idle = first, 0
    months, doms, dows = parsed.months, parsed.doms, parsed.dows
    while idle <= MAX_IDLE_DAYS:
        if months is None or day.month in months:
            in_dom = doms is None or day.day in doms
            in_dow = dows is None or day.isoweekday() % 7 in dows
            # Vixie cron (and croniter): when both day fields are restricted, either may match.
            if (in_dom or in_dow) if doms is not None and dows is not None else (in_dom and in_dow):
                yield day
                idle = -1
        idle += 1
        day += DAY


def _special_days(lock: threading.Lock, side: croniter, first: date) -> Iterator[date]:
    """The days on or after ``first`` that croniter matches for one side of an L, W or # expression."""
    cursor = datetime.combine(first, time()) - timedelta(minutes=1)
    while True:
        with lock:  # one shared croniter per side; its cursor is state
            side.set_current(cursor, force=True)
            try:
                cursor = side.get_next(datetime)
            except CroniterBadDateError:
                return
        yield cursor.date()


def runs_per_day(parsed: Parsed, first: date, span_days: int = 364) -> float:
    """Nominal fires per day (DST ignored), from the matching days in a 52-week sample."""
    end = first + timedelta(days=span_days)
    days = sum(1 for _ in takewhile(lambda day: day < end, matching_days(parsed, first)))
    return days * len(parsed.times) / span_days
