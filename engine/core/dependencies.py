"""Dependencies between schedules (SPEC §18), decided purely: which upstream periods cover a run's
period, whether a set of ``after`` edges has a cycle, and what a run does once its window passed.

A period is read from its business key alone (``core.period_keys``): a day is that local date, an
ISO week its seven dates, a slot its UTC date and minute. An upstream period *covers* a dependent
run when their periods overlap: a weekly after its dailies waits for each daily of its week, a
daily after a weekly for the week that holds the day, a slot after a slot for the same minute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from engine.core import period_keys, policies
from engine.core.clock import format_instant
from engine.core.cron import timetable
from engine.core.models import PeriodKind, Run, RunStatus, SlotReason
from engine.core.schedule_spec import OnUpstream, ScheduleSpec

# How far around a dependent's period the upstream's slots are enumerated: a weekly with
# report_on = "previous" fires up to 13 days after the first day of the period it reports on (a month's,
# up to 61; a quarter's, 183).
SLOT_MARGIN = {PeriodKind.SLOT: timedelta(days=1), PeriodKind.DAY: timedelta(days=15),
               PeriodKind.WEEK: timedelta(days=15), PeriodKind.MONTH: timedelta(days=63),
               PeriodKind.QUARTER: timedelta(days=186)}


def days_of(key: str) -> tuple[date, date]:
    """The first and last date of a business key's period (a slot's UTC date, twice)."""
    parsed = period_keys.parse(key)
    return parsed.day, period_keys.span(parsed.kind, parsed.day)[1] - timedelta(days=1)


def covers(upstream_key: str, dependent_key: str) -> bool:
    """Whether the upstream period ``upstream_key`` overlaps the dependent's period ``dependent_key`` (by dates;
    two slots: the same minute)."""
    up, down = period_keys.parse(upstream_key), period_keys.parse(dependent_key)
    if up.kind is PeriodKind.SLOT and down.kind is PeriodKind.SLOT:
        return up.slot_at == down.slot_at
    (up_first, up_last), (down_first, down_last) = days_of(upstream_key), days_of(dependent_key)
    return up_first <= down_last and down_first <= up_last


def covering_keys(upstream_keys: Iterable[str], dependent_key: str) -> list[str]:
    """The upstream keys (of its slots around the dependent's period) whose periods cover it, sorted, once each.

    A slot after slots waits for the upstream's latest slot at or before its own: a slot's period
    lasts until the next one, so that is the one that covers it.
    """
    keys = set(upstream_keys)
    if period_keys.parse(dependent_key).kind is PeriodKind.SLOT:
        slots = {k for k in keys if period_keys.parse(k).kind is PeriodKind.SLOT}
        earlier = [k for k in slots if k <= dependent_key]  # slot keys sort as text in time order
        latest = {max(earlier)} if earlier else set()
        return sorted(latest | {k for k in keys - slots if covers(k, dependent_key)})
    return sorted(k for k in keys if covers(k, dependent_key))


def upstream_periods(dependent_key: str, upstream: ScheduleSpec, kind: PeriodKind) -> list[str]:
    """The business keys of ``upstream``'s periods (of workflow period ``kind``) that cover ``dependent_key``:
    its slots around the dependent's period, read as the periods they report on."""
    first, last = days_of(dependent_key)
    margin = SLOT_MARGIN[kind]
    start = datetime.combine(first, time(), UTC) - margin
    end = datetime.combine(last, time(), UTC) + margin + timedelta(days=1)
    keys = (policies.business_period(kind, fire.at, upstream.timezone, upstream.report_on, upstream.sprint).key
            for fire in timetable.fires_between(upstream.cron, upstream.timezone, start, end,
                                                dst_gap=upstream.dst_gap, dst_fold=upstream.dst_fold))
    return covering_keys(keys, dependent_key)


def find_cycle(after: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle among ``{schedule: [upstream, ...]}`` as the path ``[a, b, ..., a]``, or None.

    Upstreams that are not keys of ``after`` end a path (the caller refuses unknown names first).
    """
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for upstream in after.get(name, ()):
            if state.get(upstream) == 1:
                return [*path[path.index(upstream):], upstream]
            if state.get(upstream) is None and upstream in after:
                found = visit(upstream, [*path, upstream])
                if found is not None:
                    return found
        state[name] = 2
        return None

    for name in sorted(after):
        if state.get(name) is None:
            found = visit(name, [name])
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class PastWindow:
    """What a run whose upstream did not succeed within its window becomes."""

    status: RunStatus
    reason: SlotReason | None


def decide_past_window(on_upstream: OnUpstream) -> PastWindow:
    """``run`` releases the run (QUEUED), ``manual`` holds it MANUAL_REQUIRED for an operator's approval,
    ``skip`` records it SKIPPED with reason ``upstream``."""
    if on_upstream is OnUpstream.RUN:
        return PastWindow(RunStatus.QUEUED, None)
    if on_upstream is OnUpstream.MANUAL:
        return PastWindow(RunStatus.MANUAL_REQUIRED, SlotReason.UPSTREAM)
    return PastWindow(RunStatus.SKIPPED, SlotReason.UPSTREAM)


def is_past_window(until: datetime | None, now: datetime) -> bool:
    """Whether a run waiting until ``until`` has waited long enough (None: it does not wait)."""
    return until is not None and now >= until


def describe(upstream: Sequence[tuple[str, str]]) -> str:
    """What a run waits for, as a person reads it: ``reportflow-daily 2026-12-02, 2026-12-03``."""
    by_schedule: dict[str, list[str]] = {}
    for schedule, key in upstream:
        by_schedule.setdefault(schedule, []).append(key)
    return "; ".join(f"{schedule} {', '.join(keys)}" for schedule, keys in by_schedule.items())


def waiting_for(run: Run) -> str | None:
    """What a run waits for now, as ``runs show`` and the calendar say it; None when it waits for no upstream."""
    if run.status is not RunStatus.WAITING or run.upstream_until is None:
        return None
    return f"waits for {describe(run.upstream) or 'no upstream period'} (until {format_instant(run.upstream_until)})"
