"""The fates of the periods before a run's own, read for its step (``StepContext.earlier_periods``).

Walks back from the period that ends at ``before``, one period at a time, and stops at the
first that has or may still get a report of its own (``engine.core.period_fates``): a report
reaches back over the ones before that, never further.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from engine.core import errors, period_fates, policies
from engine.core.models import Period, PeriodKind
from engine.core.period_fates import Fate, PeriodFate
from engine.core.schedule_spec import ScheduleSpec
from engine.runtime import Runtime
from engine.scheduling import new_runs
from engine.store import audit_rows, run_rows, schedule_rows

#: Periods read per query, and at most how far back a report reaches (a year of days).
_CHUNK = 31
_FURTHEST = 366


def earlier_periods(rt: Runtime, schedule_name: str, before: datetime) -> tuple[PeriodFate, ...]:
    """The periods of ``schedule_name`` ending at ``before`` and earlier, newest first, up to the first that is
    not ``NEVER`` (included). Empty for an unknown schedule or one whose periods are its slots."""
    with rt.store.read() as conn:
        try:
            schedule = schedule_rows.get_schedule(conn, schedule_name)
            kind = rt.workflow(schedule.spec.workflow).period
        except (errors.NotFound, errors.ConfigInvalid, errors.InvalidInput):
            return ()
        if kind is PeriodKind.SLOT:
            return ()
        zone = ZoneInfo(schedule.spec.timezone)
        too_old = audit_rows.too_old_ranges(conn, schedule.id)
        out: list[PeriodFate] = []
        end = before
        while len(out) < _FURTHEST:
            chunk = _periods_before(kind, schedule.spec, zone, end, _CHUNK)
            states = run_rows.period_states(conn, schedule.id, [p.key for p in chunk])
            for period in chunk:
                state = states.get(period.key)
                slot = state.slot if state is not None else policies.slot_for_date(
                    schedule.spec, kind, period.start_at.astimezone(zone).date())
                fate, why = period_fates.fate_of(
                    state.status if state else None, state.reason if state else None,
                    began=state.began if state else False, has_slot=slot is not None,
                    too_old=slot is not None and any(first <= slot < last for first, last in too_old))
                window_end = state.window_end if state is not None and state.window_end is not None else (
                    None if slot is None else _window_end(schedule.spec, period, slot))
                out.append(PeriodFate(period.key, period.start_at, period.end_at, fate, why, window_end))
                if fate is not Fate.NEVER:
                    return tuple(out)
            end = chunk[-1].start_at
        return tuple(out)


def _window_end(spec: ScheduleSpec, period: Period, slot: datetime) -> datetime:
    """Where the window of the period's run ends, as the run is pinned when it is created."""
    return policies.collect_window(period, slot, spec.report_on, new_runs.previous_slot(spec, slot))[0].end_at


def _periods_before(kind: PeriodKind, spec: ScheduleSpec, zone: ZoneInfo, end: datetime, count: int) -> list[Period]:
    """The ``count`` periods before the instant ``end``, newest first."""
    out: list[Period] = []
    day = (end - timedelta(microseconds=1)).astimezone(zone).date()
    for _ in range(count):
        period = policies.period_of_date(kind, day, spec.timezone, spec.sprint)
        out.append(period)
        day = period.start_at.astimezone(zone).date() - timedelta(days=1)
    return out
