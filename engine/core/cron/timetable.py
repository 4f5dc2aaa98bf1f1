"""Cron fire times in an IANA zone, with the DST choices of SPEC §2.

Pure: no I/O and no clock; every instant comes in as a parameter. An expression is read
by ``cron.expression``; this module maps its local wall times to UTC instants:

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
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from itertools import groupby, islice, takewhile
from zoneinfo import ZoneInfo

from engine.core import errors
from engine.core.clock import to_utc
from engine.core.cron import expression
from engine.core.schedule_spec import DstFold, DstGap

TICK = timedelta(microseconds=1)
_LOOKBEHIND = timedelta(days=2)  # a fold's second pass or a gap across midnight moves fires into the next day
_HORIZON = timedelta(days=expression.MAX_IDLE_DAYS + 3)  # how far "the next fire" is looked for


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire of a schedule: a UTC instant and the local wall time it stands for."""

    at: datetime  # aware UTC instant of the slot
    local: datetime  # ``at`` in the schedule's zone (aware)
    nominal: datetime  # naive local wall time the cron expression named
    moved: bool  # shifted out of a DST gap, or the second occurrence of a folded wall time
    note: str | None  # human explanation when a transition touched this fire


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
    offsets = {_offset(wall.replace(tzinfo=tz, fold=fold)) for wall in (midnight, midnight + expression.DAY) for fold in (0, 1)}
    # Two transitions under a day apart that cancel out would pass: tzdata has none since 1970.
    if len(offsets) != 1:
        return None
    return (midnight - offsets.pop()).replace(tzinfo=UTC), midnight.replace(tzinfo=tz)


def earliest(tz: ZoneInfo, midnight: datetime) -> datetime:
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


def stream(parsed: expression.Parsed, tz: ZoneInfo, start: datetime, until: datetime,
            gap: DstGap, fold: DstFold) -> Iterator[Fire]:
    """Every fire with ``start <= at <= until`` (aware UTC), strictly ascending, made lazily.

    It may yield a few fires past ``until``; callers cut there. The bound matters: with
    ``dst_gap=skip`` a cron can match days forever without firing ("30 2 * 3 0#2" in New York).
    """
    pending: list[Fire] = []  # fires of transition days not yet known to be in order
    times, last_day = parsed.times, until.date() + _LOOKBEHIND  # no zone is 2 days from UTC
    for day in expression.matching_days(parsed, start.astimezone(tz).date() - _LOOKBEHIND):
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
        bound = earliest(tz, midnight + expression.DAY)
        cut = bisect_left(pending, bound, key=_at)
        ready, pending = pending[:cut], pending[cut:]
        for _, group in groupby(ready, key=_at):
            fire = _combine(list(group))
            if fire.at >= start:
                yield fire
    yield from (f for f in pending if start <= f.at <= until)


def prepare(expr: str, tz: str, instant: datetime) -> tuple[expression.Parsed, ZoneInfo, datetime]:
    """``expr`` read, ``tz`` found and ``instant`` in UTC; InvalidInput for a bad expression or zone."""
    return expression.parse(expr), expression.zone(tz), to_utc(instant)


def fires_between(expr: str, tz: str, start: datetime, end: datetime, *,
                  dst_gap: DstGap = DstGap.SHIFT, dst_fold: DstFold = DstFold.FIRST) -> Iterator[Fire]:
    """Every fire with ``start <= at <= end``, ascending, no duplicates (aware instants only)."""
    parsed, zone_info, begin = prepare(expr, tz, start)  # eager: bad input raises here, not on iteration
    finish = to_utc(end)
    return takewhile(lambda f: f.at <= finish, stream(parsed, zone_info, begin, finish, dst_gap, dst_fold))


def preview(expr: str, tz: str, after: datetime, count: int = 5, *,
            dst_gap: DstGap = DstGap.SHIFT, dst_fold: DstFold = DstFold.FIRST) -> list[Fire]:
    """The next ``count`` fires strictly after ``after`` (fewer only for crons that stop firing)."""
    parsed, zone_info, begin = prepare(expr, tz, after)
    fires = stream(parsed, zone_info, begin + TICK, begin + _HORIZON, dst_gap, dst_fold)
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
    parsed, zone_info = expression.parse(expr), expression.zone(tz)
    begin = earliest(zone_info, datetime.combine(first, time()))
    stop = earliest(zone_info, datetime.combine(last, time()) + 2 * expression.DAY)
    fires = takewhile(lambda f: f.at < stop, stream(parsed, zone_info, begin, stop, dst_gap, dst_fold))
    return [fire for fire in fires if first <= fire.local.date() <= last]


def estimate_fire_count(expr: str, tz: str, start: datetime, end: datetime) -> int:
    """Fires in [start, end]: exact up to 8 days, else scaled from a 52-week sample, never enumerated."""
    parsed, zone_info, begin = prepare(expr, tz, start)
    finish = to_utc(end)
    if finish < begin:
        return 0
    if finish - begin <= 8 * expression.DAY:
        return sum(1 for _ in fires_between(expr, tz, begin, finish))
    per_day = expression.runs_per_day(parsed, begin.astimezone(zone_info).date())
    return round((finish - begin) / expression.DAY * per_day)
