"""Cron fire times in an IANA zone, with the DST choices of SPEC §2, and schedule checks (§3).

Pure: no I/O and no clock; every instant comes in as a parameter. Expressions are
5-field crons (or an @alias), read as POSIX cron reads them (``cron_fields``: N-N, list
stars, ``?``); croniter judges the rest of the syntax and finds the days of L, W and #,
and this module owns day matching (the OR of restricted day fields) and the mapping of
local wall times to UTC instants:

* a wall time that does not exist (DST gap) fires at the first instant after the gap
  (``dst_gap=shift``) or not at all (``skip``); wall times of one gap that land on the
  same instant fire once;
* a wall time that exists twice (DST fold) fires at its first occurrence (``first``),
  its second (``second``) or both (``both``).

Enumeration walks naive local days (so each wall time is seen once) and converts to
UTC with a constant offset on the days without a transition, which is nearly all.
"""

from __future__ import annotations

import functools
import heapq
import threading
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from itertools import groupby, islice, takewhile
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

from engine.core import cron_fields, errors, period_keys, redact
from engine.core.clock import to_utc
from engine.core.models import DstFold, DstGap, PeriodKind, ReportOn, ScheduleSpec

_DAY = timedelta(days=1)
_TICK = timedelta(microseconds=1)
_LOOKBEHIND = timedelta(days=2)  # a fold's second pass or a gap across midnight moves fires into the next day
_MAX_IDLE_DAYS = 8 * 366 + 31  # Feb 29 skips 2100: a cron may wait 8 years, never longer, between days
_HORIZON = timedelta(days=_MAX_IDLE_DAYS + 3)  # how far "the next fire" is looked for
_REFERENCE = datetime(2026, 1, 1, tzinfo=UTC)  # check_schedule's "now": validity never depends on the clock
_ALIASES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
            "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire of a schedule: a UTC instant and the local wall time it stands for."""

    at: datetime  # aware UTC instant of the slot
    local: datetime  # ``at`` in the schedule's zone (aware)
    nominal: datetime  # naive local wall time the cron expression named
    moved: bool  # shifted out of a DST gap, or the second occurrence of a folded wall time
    note: str | None  # human explanation when a transition touched this fire


@dataclass(frozen=True)
class CronCheck:
    """The validation summary of a schedule (SPEC §3): figures, next fires, problems."""

    runs_per_day: float
    min_interval: timedelta | None
    next_fires: list[Fire]
    problems: list[tuple[str, str]]  # (config field, problem)

    @property
    def ok(self) -> bool:
        """True when the expression has no problems."""
        return not self.problems


@dataclass(frozen=True)
class _Parsed:
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
        raise errors.InvalidInput(f"unknown timezone '{name}' (use an IANA name such as Asia/Seoul)") from exc


def check_expression(expr: str) -> None:
    """Raise InvalidInput naming the field at fault unless ``expr`` is a usable 5-field cron."""
    _parse(expr)


@functools.lru_cache(maxsize=4096)
def _parse(expr: str) -> _Parsed:
    # Building croniter objects costs ~0.3 ms (SPEC §11): parse once per expression.
    # repr: a newline or NUL in the input stays on one line; echoed: a huge one is quoted clipped
    quoted, text = redact.echoed(expr), expr.strip()
    if not text:
        raise errors.InvalidInput("cron expression is empty (e.g. '30 19 * * *')")
    if text.startswith("@"):
        if text.lower() not in _ALIASES:
            raise errors.InvalidInput(f"{quoted}: unknown alias (use @hourly, @daily, @weekly, @monthly or @yearly)")
        text = _ALIASES[text.lower()]
    fields = text.split()
    if len(fields) != 5:
        extra = "; seconds and years are not supported" if len(fields) in (6, 7) else ""
        raise errors.InvalidInput(
            f"{quoted}: expected 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}{extra}")
    reading = cron_fields.read(quoted, fields)
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
    parsed = _Parsed(
        times=tuple(sorted(timedelta(hours=int(h), minutes=int(m))
                           for h in (hours or range(24)) for m in (minutes or range(60)))),
        months=None if months is None else frozenset(int(v) for v in months),
        doms=None if doms is None or special else frozenset(int(v) for v in doms),
        dows=None if dows is None else frozenset(int(v) % 7 for v in dows),
        special=special)
    if next(_matching_days(parsed, date(2000, 1, 1)), None) is None:
        raise errors.InvalidInput(f"{quoted}: never fires (no date matches its day-of-month, month and day-of-week)")
    return parsed


def _culprit(reading: cron_fields.Reading) -> str:
    """The first field croniter refuses on its own (every other field ``*``), as "name 'value'"."""
    for index, ((name, _, _), value) in enumerate(zip(cron_fields.FIELDS, reading.as_written, strict=True)):
        alone = ["*"] * 5
        alone[index] = value
        try:
            croniter.expand(" ".join(alone))
        except CroniterError:
            return f"{name} '{value}'"
    return "the day fields together"  # each field reads, their combination does not


def _matching_days(parsed: _Parsed, first: date) -> Iterator[date]:
    """Local dates on or after ``first`` whose day fields match, ascending (ends after 8 idle years)."""
    if parsed.special:
        days = heapq.merge(*(_special_days(parsed.lock, side, first) for side in parsed.special))
        yield from (day for day, _ in groupby(days))
        return
    day, idle = first, 0
    months, doms, dows = parsed.months, parsed.doms, parsed.dows
    while idle <= _MAX_IDLE_DAYS:
        if months is None or day.month in months:
            in_dom = doms is None or day.day in doms
            in_dow = dows is None or day.isoweekday() % 7 in dows
            # Vixie cron (and croniter): when both day fields are restricted, either may match.
            if (in_dom or in_dow) if doms is not None and dows is not None else (in_dom and in_dow):
                yield day
                idle = -1
        idle += 1
        day += _DAY


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


def _offset(local: datetime) -> timedelta:
    offset = local.utcoffset()
    assert offset is not None  # always set for a ZoneInfo-aware datetime
    return offset


@functools.lru_cache(maxsize=8192)
def _plain_day(tz: ZoneInfo, day: date) -> tuple[datetime, datetime] | None:
    """(UTC instant, aware local) of ``day``'s midnight if no transition falls in the day, else None.

    Cached: every schedule of a zone walks the same days, and zoneinfo calls dominate the cost.
    """
    midnight = datetime.combine(day, time())
    offsets = {_offset(wall.replace(tzinfo=tz, fold=fold)) for wall in (midnight, midnight + _DAY) for fold in (0, 1)}
    # Two transitions under a day apart that cancel out would pass: tzdata has none since 1970.
    if len(offsets) != 1:
        return None
    return (midnight - offsets.pop()).replace(tzinfo=UTC), midnight.replace(tzinfo=tz)


def _earliest(tz: ZoneInfo, midnight: datetime) -> datetime:
    """A lower bound for every fire whose wall time is at or after ``midnight``."""
    latest_offset = max(_offset(midnight.replace(tzinfo=tz)), _offset(midnight.replace(tzinfo=tz, fold=1)))
    return (midnight - latest_offset).replace(tzinfo=UTC)


def _gap_note(walls: list[datetime], local: datetime, moved: bool) -> str:
    span = f"{walls[0]:%H:%M}" if len(walls) == 1 else f"{walls[0]:%H:%M}-{walls[-1]:%H:%M}"
    verb = "does" if len(walls) == 1 else "do"
    then = f"fires at {local:%H:%M}" if moved else f"the {local:%H:%M} fire stands in"
    return f"{span} {verb} not exist on {walls[0]:%Y-%m-%d} (DST gap); {then}"


def _gap_end(tz: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The transition instant in (before, after] (naive UTC), searched to the second."""
    target = _offset(after.replace(tzinfo=UTC).astimezone(tz))
    low, high = 0, int((after - before).total_seconds())
    while high - low > 1:
        mid = (low + high) // 2
        probe = (before + timedelta(seconds=mid)).replace(tzinfo=UTC).astimezone(tz)
        low, high = (low, mid) if _offset(probe) == target else (mid, high)
    return (before + timedelta(seconds=high)).replace(tzinfo=UTC)


def _resolve(wall: datetime, tz: ZoneInfo, gap: DstGap, fold: DstFold) -> list[Fire]:
    """The fires of one naive wall time under the DST choices (zero, one or two)."""
    first, second = wall.replace(tzinfo=tz), wall.replace(tzinfo=tz, fold=1)
    utc_first, utc_second = wall - _offset(first), wall - _offset(second)
    if utc_first == utc_second:
        return [Fire(utc_first.replace(tzinfo=UTC), first, wall, False, None)]
    if utc_first < utc_second:  # a fold: fold=0 is the earlier occurrence
        note = f"{wall:%H:%M} occurs twice on {wall:%Y-%m-%d} (DST fold); this is its second occurrence ({second:%Z})"
        fires = [Fire(utc_first.replace(tzinfo=UTC), first, wall, False, None),
                 Fire(utc_second.replace(tzinfo=UTC), second, wall, True, note)]
        return {DstFold.FIRST: fires[:1], DstFold.SECOND: fires[1:], DstFold.BOTH: fires}[fold]
    if gap is DstGap.SKIP:
        return []
    at = _gap_end(tz, utc_second, utc_first)
    local = at.astimezone(tz)
    return [Fire(at, local, wall, True, _gap_note([wall], local, moved=True))]


def _combine(group: list[Fire]) -> Fire:
    """One fire for wall times that landed on one instant (a gap): the unmoved one, else the earliest."""
    if len(group) == 1:
        return group[0]
    best = group[0]
    walls = sorted(f.nominal for f in group if f.moved)
    return replace(best, note=_gap_note(walls, best.local, best.moved))


def _at(fire: Fire) -> datetime:
    return fire.at


def _stream(parsed: _Parsed, tz: ZoneInfo, start: datetime, until: datetime,
            gap: DstGap, fold: DstFold) -> Iterator[Fire]:
    """Every fire with ``start <= at <= until`` (aware UTC), strictly ascending, made lazily.

    It may yield a few fires past ``until``; callers cut there. The bound matters: with
    ``dst_gap=skip`` a cron can match days forever without firing ("30 2 * 3 0#2" in New York).
    """
    pending: list[Fire] = []  # fires of transition days not yet known to be in order
    times, last_day = parsed.times, until.date() + _LOOKBEHIND  # no zone is 2 days from UTC
    for day in _matching_days(parsed, start.astimezone(tz).date() - _LOOKBEHIND):
        if day > last_day:
            break
        midnight, plain = datetime.combine(day, time()), _plain_day(tz, day)
        if plain is not None and not pending:
            # Hot path: one offset for the whole day, fires made only as the caller asks.
            base_at, base_local = plain
            if base_at + times[-1] < start:
                continue
            for index in range(bisect_left(times, start - base_at) if base_at < start else 0, len(times)):
                step = times[index]
                yield Fire(base_at + step, base_local + step, midnight + step, False, None)
            continue
        for step in times:
            pending.extend(_resolve(midnight + step, tz, gap, fold))
        pending.sort(key=lambda f: (f.at, f.moved, f.nominal))
        # Later days cannot fire before this bound, so everything below it is final and ordered.
        bound = _earliest(tz, midnight + _DAY)
        cut = bisect_left(pending, bound, key=_at)
        ready, pending = pending[:cut], pending[cut:]
        for _, group in groupby(ready, key=_at):
            fire = _combine(list(group))
            if fire.at >= start:
                yield fire
    yield from (f for f in pending if start <= f.at <= until)


def _prepare(expr: str, tz: str, instant: datetime) -> tuple[_Parsed, ZoneInfo, datetime]:
    return _parse(expr), zone(tz), to_utc(instant)


def fires_between(expr: str, tz: str, start: datetime, end: datetime, *,
                  dst_gap: DstGap = DstGap.SHIFT, dst_fold: DstFold = DstFold.FIRST) -> Iterator[Fire]:
    """Every fire with ``start <= at <= end``, ascending, no duplicates (aware instants only)."""
    parsed, zone_info, begin = _prepare(expr, tz, start)  # eager: bad input raises here, not on iteration
    finish = to_utc(end)
    return takewhile(lambda f: f.at <= finish, _stream(parsed, zone_info, begin, finish, dst_gap, dst_fold))


def preview(expr: str, tz: str, after: datetime, count: int = 5, *,
            dst_gap: DstGap = DstGap.SHIFT, dst_fold: DstFold = DstFold.FIRST) -> list[Fire]:
    """The next ``count`` fires strictly after ``after`` (fewer only for crons that stop firing)."""
    parsed, zone_info, begin = _prepare(expr, tz, after)
    fires = _stream(parsed, zone_info, begin + _TICK, begin + _HORIZON, dst_gap, dst_fold)
    return list(islice(takewhile(lambda f: f.at <= begin + _HORIZON, fires), count))


def next_fire_after(expr: str, tz: str, after: datetime, *,
                    dst_gap: DstGap = DstGap.SHIFT, dst_fold: DstFold = DstFold.FIRST) -> Fire:
    """The first fire with ``at > after``; InvalidInput if the cron never fires again."""
    fires = preview(expr, tz, after, 1, dst_gap=dst_gap, dst_fold=dst_fold)
    if not fires:
        raise errors.InvalidInput(f"'{expr}' never fires after {after.isoformat()}")
    return fires[0]


def latest_fire_at_or_before(expr: str, tz: str, instant: datetime, *, dst_gap: DstGap = DstGap.SHIFT,
                             dst_fold: DstFold = DstFold.FIRST) -> Fire | None:
    """The last fire with ``at <= instant``, else None (a cron waits at most ~8 years between days)."""
    # Growing windows keep a minute cron cheap (one hour) and still reach a yearly one, and the last
    # reaches a 29 February cron across 2100; only crons firing under once in 400 days get that far.
    for hours in (1, 24, 8 * 24, 32 * 24, 400 * 24, int(_HORIZON / timedelta(hours=1))):
        window = list(fires_between(expr, tz, instant - timedelta(hours=hours), instant,
                                    dst_gap=dst_gap, dst_fold=dst_fold))
        if window:
            return window[-1]
    return None


def fires_on_local_dates(expr: str, tz: str, first: date, last: date, *, dst_gap: DstGap = DstGap.SHIFT,
                         dst_fold: DstFold = DstFold.FIRST) -> list[Fire]:
    """Fires whose local date (of ``local``) lies in [first, last], ascending."""
    parsed, zone_info = _parse(expr), zone(tz)
    begin = _earliest(zone_info, datetime.combine(first, time()))
    stop = _earliest(zone_info, datetime.combine(last, time()) + 2 * _DAY)
    fires = takewhile(lambda f: f.at < stop, _stream(parsed, zone_info, begin, stop, dst_gap, dst_fold))
    return [fire for fire in fires if first <= fire.local.date() <= last]


def _runs_per_day(parsed: _Parsed, first: date, span_days: int = 364) -> float:
    """Nominal fires per day (DST ignored), from the matching days in a 52-week sample."""
    end = first + timedelta(days=span_days)
    days = sum(1 for _ in takewhile(lambda day: day < end, _matching_days(parsed, first)))
    return days * len(parsed.times) / span_days


def estimate_fire_count(expr: str, tz: str, start: datetime, end: datetime) -> int:
    """Fires in [start, end]: exact up to 8 days, else scaled from a 52-week sample, never enumerated."""
    parsed, zone_info, begin = _prepare(expr, tz, start)
    finish = to_utc(end)
    if finish < begin:
        return 0
    if finish - begin <= 8 * _DAY:
        return sum(1 for _ in fires_between(expr, tz, begin, finish))
    per_day = _runs_per_day(parsed, begin.astimezone(zone_info).date())
    return round((finish - begin) / _DAY * per_day)


def _fmt(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    parts = [(seconds // 86400, "d"), (seconds % 86400 // 3600, "h"), (seconds % 3600 // 60, "m"), (seconds % 60, "s")]
    return "".join(f"{n}{unit}" for n, unit in parts if n) or "0s"


def check(expr: str, tz: str, *, now: datetime, period: PeriodKind = PeriodKind.SLOT,
          allow_frequent: bool = False, min_interval: timedelta = timedelta(minutes=5),
          jitter: timedelta = timedelta(0), grace: timedelta = timedelta(minutes=10),
          dst_gap: DstGap = DstGap.SHIFT, dst_fold: DstFold = DstFold.FIRST,
          workflow: str | None = None) -> CronCheck:
    """Validate a schedule as of ``now`` (SPEC §3).

    Raises InvalidInput for a bad expression or zone (nothing else can be computed);
    every other finding is a ``(field, problem)`` in the result: DST choices a
    period workflow cannot take, jitter not below grace, fires closer than
    ``min_interval`` (unless ``allow_frequent``, sampled over a year, at most 2,000
    fires), no fire at all, more than one fire in a period (looked for over ~400 days).
    ``workflow`` only names the workflow in messages. ``next_fires`` are after ``now``.
    """
    parsed, zone_info, start = _prepare(expr, tz, now)
    problems: list[tuple[str, str]] = []
    kind = f"{workflow}" if workflow else f"a {'daily' if period is PeriodKind.DAY else 'weekly'} workflow"
    if period is not PeriodKind.SLOT and dst_gap is DstGap.SKIP:
        problems.append(("dst_gap", f'dst_gap = "skip" is only for slot workflows; {kind} needs every period'))
    if period is not PeriodKind.SLOT and dst_fold is DstFold.BOTH:
        problems.append(("dst_fold",
                         f'dst_fold = "both" is only for slot workflows; {kind} allows one slot per period'))
    if jitter >= grace:
        problems.append(("jitter", f"jitter {_fmt(jitter)} must be below grace {_fmt(grace)}"))

    horizon = start + timedelta(days=366)
    upcoming = _stream(parsed, zone_info, start + _TICK, horizon, dst_gap, dst_fold)
    sample = list(islice(takewhile(lambda f: f.at <= horizon, upcoming), 2000))
    gaps = [b.at - a.at for a, b in zip(sample, sample[1:], strict=False)]
    shortest = min(gaps, default=None)
    if shortest is not None and shortest < min_interval and not allow_frequent:
        how = f"every {_fmt(shortest)}" if max(gaps) == shortest else f"as little as {_fmt(shortest)} apart"
        limit = _fmt(min_interval)
        problems.append(("cron", f"fires {how}; the minimum interval is {limit} (set allow_frequent = true)"))
    next_fires = preview(expr, tz, start, 5, dst_gap=dst_gap, dst_fold=dst_fold)
    if not next_fires:
        problems.append(("cron", "never fires: every slot falls in a DST gap that dst_gap = \"skip\" drops"))
    if period is not PeriodKind.SLOT:
        problem = _period_problem(parsed, zone_info, start, period, dst_gap, dst_fold, kind)
        if problem:
            problems.append(("cron", problem))
    return CronCheck(runs_per_day=_runs_per_day(parsed, start.astimezone(zone_info).date()),
                     min_interval=shortest, next_fires=next_fires, problems=problems)


def _period_problem(parsed: _Parsed, tz: ZoneInfo, now: datetime, period: PeriodKind,
                    gap: DstGap, fold: DstFold, kind: str) -> str | None:
    """The first period within ~400 days (from the first whole one) holding more than one fire."""
    today = now.astimezone(tz).date()
    first = today + _DAY if period is PeriodKind.DAY else today + timedelta(days=7 - today.weekday())
    begin = _earliest(tz, datetime.combine(first, time()))
    stop = begin + timedelta(days=400)
    # Fires come in time order, so a period's fires are consecutive: stop at the first crowded one.
    fires = takewhile(lambda f: f.at <= stop, _stream(parsed, tz, begin, stop, gap, fold))
    for key, group in groupby(fires, lambda f: period_keys.format(period, f.local.date())):
        count = sum(1 for _ in group)
        if count > 1:
            where, unit = (f"on {key}", "day") if period is PeriodKind.DAY else (f"in {key}", "ISO week")
            return f"fires {count} times {where}; {kind} allows one slot per {unit}"
    return None


def check_schedule(spec: ScheduleSpec, period: PeriodKind, *, now: datetime | None = None) -> CronCheck:
    """Config-time validation: ConfigInvalid (keyed by field) for the first problem, else the summary.

    Without ``now`` a fixed reference instant is used, so validity never depends on the clock.
    """
    for key, probe in (("cron", lambda: check_expression(spec.cron)), ("timezone", lambda: zone(spec.timezone))):
        try:
            probe()
        except errors.InvalidInput as exc:
            raise errors.ConfigInvalid(exc.message, key=key) from exc
    result = check(spec.cron, spec.timezone, now=now or _REFERENCE, period=period,
                   allow_frequent=spec.allow_frequent, jitter=spec.jitter, grace=spec.grace,
                   dst_gap=spec.dst_gap, dst_fold=spec.dst_fold, workflow=spec.workflow)
    if result.problems:
        key, problem = result.problems[0]
        raise errors.ConfigInvalid(problem, key=key)
    empty = _empty_current_window(spec, period, now or _REFERENCE)
    if empty:
        raise errors.ConfigInvalid(empty, key="report_on")
    return result


def _empty_current_window(spec: ScheduleSpec, period: PeriodKind, now: datetime) -> str | None:
    """A ``current`` window whose slot is at its period's start covers nothing: the problem, or None."""
    if spec.report_on is not ReportOn.CURRENT or period is PeriodKind.SLOT:
        return None
    for fire in preview(spec.cron, spec.timezone, now, 20, dst_gap=spec.dst_gap, dst_fold=spec.dst_fold):
        local = fire.local
        starts_day = (local.hour, local.minute, local.second) == (0, 0, 0)
        if starts_day and (period is PeriodKind.DAY or local.weekday() == 0):
            unit = "day" if period is PeriodKind.DAY else "ISO week"
            return (f'report_on = "current" with a slot at the start of its {unit} ({local:%a %H:%M}) reports an '
                    f'empty window; use "previous" (the {unit} before the slot) or "interval" (since the previous slot)')
    return None
