"""Success rate and freshness (SPEC §15.2), and late periods (``run_late``, §15.1). Pure: the store reads the facts.

A period is *due* once its deadline has passed (``slot + deadline <= now``): before
that, a run still under way is not a failure yet. Success rate: due periods whose
latest revision is SUCCESS ÷ periods due. Freshness: due periods whose latest
revision reached SUCCESS within the deadline of the slot ÷ periods due (a backfill
that filled a period later makes it successful, not fresh). A period before the
schedule existed could never be on time: a backfill of it counts for the success
rate, never for freshness (history backfilled alone has no freshness, not 13%).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.core import calendars
from engine.core.cron import timetable
from engine.core.models import ACTIVE_STATUSES, RunStatus
from engine.core.schedule_spec import Schedule, ScheduleSpec

MAX_SLOTS = 20_000  # a minutely schedule over 30 days is 43,200 slots: a window is cut to its newest ones


@dataclass(frozen=True)
class PeriodFact:
    """A period's latest revision: its status and when it finished."""

    slot_at: datetime
    status: RunStatus
    completed_at: datetime | None
    reason: str | None = None  # why a slot was not run (``holiday``, ``maintenance``, ...)


@dataclass(frozen=True)
class Slo:
    success_rate: float | None  # None: no period due in the window
    freshness: float | None
    periods_due: int
    succeeded: int
    fresh: int
    window: timedelta
    fresh_due: int = 0  # the periods due that freshness counts: those since the schedule existed


def deadline_of(spec: ScheduleSpec) -> timedelta:
    """The schedule's ``deadline``, by default ``grace + max_runtime``, plus ``after_window`` for a schedule that
    waits for others (its wait is not lateness of its own: a late upstream raises its own alerts)."""
    if spec.deadline is not None:
        return spec.deadline
    return spec.grace + spec.max_runtime + (spec.after_window if spec.after else timedelta(0))


def window_slots(spec: ScheduleSpec, start: datetime, end: datetime, *, limit: int = MAX_SLOTS) -> list[datetime]:
    """The schedule's slots in ``[start, end]`` by its cron, the newest ``limit`` of them."""
    slots = [f.at for f in timetable.fires_between(spec.cron, spec.timezone, start, end, dst_gap=spec.dst_gap,
                                                   dst_fold=spec.dst_fold)]
    return slots[-limit:]


def counted_slots(schedule: Schedule, slots: Sequence[datetime], facts: Mapping[datetime, PeriodFact]) -> list[datetime]:
    """The slots that count for success rate and freshness: a period before the schedule existed only when
    something ran it (a backfill); a holiday's or a maintenance window's period never (it was not due),
    recorded so or not ticked yet (the schedule's own pause; configured windows are recorded by the tick)."""
    if schedule.created_at is not None:
        slots = [s for s in slots if s > schedule.created_at or s in facts]
    own = calendars.windows_of(schedule, ())
    return [s for s in slots if (facts[s].reason not in calendars.EXCUSED if s in facts
                                 else calendars.excuse(schedule.spec, own, s) is None)]


def since_created(schedule: Schedule, slots: Sequence[datetime]) -> list[datetime]:
    """The ``slots`` that could have been on time: those after the schedule was created."""
    return [s for s in slots if schedule.created_at is None or s > schedule.created_at]


def measure(schedule: Schedule, slots: Sequence[datetime], facts: Mapping[datetime, PeriodFact], *,
            now: datetime, window: timedelta) -> Slo:
    """One schedule's success rate and freshness over ``window`` before ``now``, from its ``window_slots`` and
    their ``facts`` (the latest revision of each period that has a run)."""
    return compute_slo(counted_slots(schedule, slots, facts), facts, now=now, deadline=deadline_of(schedule.spec),
                       window=window, created_at=schedule.created_at)


def compute_slo(slots: Sequence[datetime], facts: Mapping[datetime, PeriodFact], *, now: datetime,
                deadline: timedelta, window: timedelta, created_at: datetime | None = None) -> Slo:
    """Success rate and freshness over ``slots`` (the schedule's slots in the window) at ``now``; freshness over
    those after ``created_at`` only (None when there are none)."""
    due = [slot for slot in slots if slot + deadline <= now]
    succeeded = fresh = fresh_due = 0
    for slot in due:
        timely = created_at is None or slot > created_at
        fresh_due += timely
        fact = facts.get(slot)
        if fact is None or fact.status is not RunStatus.SUCCESS:
            continue
        succeeded += 1
        if timely and fact.completed_at is not None and fact.completed_at <= slot + deadline:
            fresh += 1
    if not due:
        return Slo(None, None, 0, 0, 0, window)
    return Slo(succeeded / len(due), fresh / fresh_due if fresh_due else None, len(due), succeeded, fresh, window,
               fresh_due)


def late_slots(slots: Sequence[datetime], facts: Mapping[datetime, PeriodFact], *, now: datetime,
               deadline: timedelta) -> list[datetime]:
    """Slots past ``slot + deadline`` with no row at all, or whose latest revision is still waiting or running.

    A period that ended FAILED, PARTIAL_SUCCESS or MISSED has had its own alert; SKIPPED
    and CANCELLED were decided.
    """
    late = []
    for slot in slots:
        if slot + deadline > now:
            continue
        fact = facts.get(slot)
        if fact is None or fact.status in ACTIVE_STATUSES:
            late.append(slot)
    return late
