"""Read side of schedules: each with its latest run, and the next fire times."""

from __future__ import annotations

from dataclasses import dataclass

from engine.core import calendars, healing, slo
from engine.core.cron import timetable
from engine.core.models import Run
from engine.core.schedule_spec import Schedule, ScheduleSpec
from engine.runtime import Runtime
from engine.store import health_rows, periods, schedule_rows


@dataclass(frozen=True)
class ScheduleOverview:
    schedule: Schedule
    last_run: Run | None
    slo: slo.Slo | None = None  # success rate and freshness (SPEC §15.2)
    # Its maintenance windows not over yet (configured ones and its pause), soonest first.
    maintenance: tuple[calendars.MaintenanceWindow, ...] = ()


def _ahead(rt: Runtime, schedule: Schedule) -> tuple[calendars.MaintenanceWindow, ...]:
    now = rt.clock.now()
    return tuple(sorted((w for w in calendars.windows_of(schedule, rt.config.maintenance) if w.end > now),
                        key=lambda w: w.start))


def schedules_overview(rt: Runtime, *, include_archived: bool = False) -> list[ScheduleOverview]:
    """Every schedule with its last run (``schedules list``)."""
    with rt.store.read() as conn:
        schedules = schedule_rows.list_schedules(conn, include_archived=include_archived)
        last = schedule_rows.last_runs(conn, [s.id for s in schedules])
        now, window = rt.clock.now(), rt.config.notify.slo_window
        measured = {s.id: periods.measure(conn, s, now, window, rt.period_kind(s.spec.workflow))
                    for s in schedules if not s.archived}
    return [ScheduleOverview(s, last.get(s.id), measured.get(s.id), _ahead(rt, s)) for s in schedules]


def schedule_overview(rt: Runtime, name: str) -> ScheduleOverview:
    """One schedule with its last run; raises NotFound."""
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, name)
        last = schedule_rows.last_runs(conn, [schedule.id])
        measured = periods.measure(conn, schedule, rt.clock.now(), rt.config.notify.slo_window,
                                   rt.period_kind(schedule.spec.workflow))
    return ScheduleOverview(schedule, last.get(schedule.id), measured, _ahead(rt, schedule))


def preview(rt: Runtime, name: str, count: int) -> tuple[ScheduleSpec, list[timetable.Fire], list[str | None]]:
    """The next ``count`` fires from the current clock (DST-moved ones marked), and for each why it will not run
    (``holiday``, ``maintenance``, which a pause is too), as the tick will decide: None for a slot that runs."""
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, name)
    spec = schedule.spec
    fires = timetable.preview(spec.cron, spec.timezone, rt.clock.now(), count, dst_gap=spec.dst_gap,
                              dst_fold=spec.dst_fold)
    windows = calendars.windows_of(schedule, rt.config.maintenance)
    excused = [calendars.excuse(spec, windows, fire.at) for fire in fires]
    return spec, fires, [None if reason is None else reason.value for reason in excused]


def provider_health(rt: Runtime) -> list[healing.ProviderHealth]:
    """The latest probe of every provider the schedules depend on (a model server, Notion), by label."""
    with rt.store.read() as conn:
        return sorted(health_rows.get_health(conn).values(), key=lambda h: h.label)


def schedule_slo(rt: Runtime, schedule_name: str) -> slo.Slo:
    """Success rate, freshness, periods due and window of one schedule at ``rt.clock.now()``."""
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, schedule_name)
        return periods.measure(conn, schedule, rt.clock.now(), rt.config.notify.slo_window,
                               rt.period_kind(schedule.spec.workflow))
