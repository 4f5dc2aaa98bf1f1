"""The run-history read model behind the web page (and usable by the CLI).

``calendar`` answers "what happened to every business period of this
schedule, and why": one cell per period, the run's status when a row exists,
otherwise the reason none does (``too_old`` or ``disabled`` from the audit, pruned
from the recorded prune ranges, before the schedule existed, not yet due), and whether the run
saved a report or found nothing to report (a quiet period: "no commits"). ``month`` lays the
cells of one month out as weeks, Monday first. ``plan_cells`` and ``plan_month`` are the pure
parts; the shells load rows and call them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from engine.core import calendars, dependencies, errors, inputs, policies, retention, revisions
from engine.core.audit import AuditEvent
from engine.core.cron import timetable
from engine.core.models import PeriodKind, Run, RunStatus
from engine.core.schedule_spec import Schedule, Sprint
from engine.runtime import Runtime
from engine.store import calendar_rows, history_rows, pruning, schedule_rows

# States of a period without a run row (cells that carry a RunStatus value have a row).
NOT_YET_DUE = "NOT_YET_DUE"
BEFORE_SCHEDULE = "BEFORE_SCHEDULE"
TOO_OLD = "TOO_OLD"
DISABLED = "DISABLED"
AWAITING_TICK = "AWAITING_TICK"
PRUNED = "PRUNED"  # removed by a prune: settled history that backfill leaves alone unless --include-pruned
NO_ROW = "NO_ROW"
NO_ROW_STATES = (TOO_OLD, DISABLED, BEFORE_SCHEDULE, NOT_YET_DUE, AWAITING_TICK, PRUNED, NO_ROW)
SLOT_CELL_LIMIT = 400
# Why a run skipped its later steps, in the calendar's words: a quiet period is not a missing report.
QUIET_REASONS = {"no_activity": "no commits"}
# Row states `backfill` re-queues (the §12 decider's): with the row-less past periods, what a range offers to fix.
_BACKFILL_REQUEUES = frozenset(s.value for s in RunStatus if revisions.decide_action(
    revisions.Command.BACKFILL, s) is revisions.PeriodAction.REQUEUE)


@dataclass(frozen=True)
class Cell:
    """One business period of a schedule in the calendar."""

    key: str
    day: date  # a business date inside the period (what `backfill --from/--to` takes)
    slot_at: datetime
    state: str  # a RunStatus value, or one of NO_ROW_STATES
    run_id: int | None = None
    reason: str | None = None
    audit_id: int | None = None
    report: bool = False  # the run saved a report (the cell links to it)
    quiet: bool = False  # the run succeeded and found nothing to report (``reason`` says what)

    @property
    def excused(self) -> bool:
        """A slot not run on purpose (a holiday, a maintenance window): the calendar names the reason."""
        return self.reason in calendars.EXCUSED

    @property
    def backfillable(self) -> bool:
        """A past period that `backfill` would create or re-queue (a holiday's or a window's is no gap: the page
        offers no backfill for it, though `backfill` would run it if asked)."""
        return self.state in (TOO_OLD, DISABLED, BEFORE_SCHEDULE, AWAITING_TICK, NO_ROW) or \
            (self.state in _BACKFILL_REQUEUES and not self.excused)


@dataclass(frozen=True)
class CalendarRow:
    schedule: Schedule
    period: PeriodKind
    cells: tuple[Cell, ...]

    def backfill_ranges(self) -> list[tuple[date, date, int]]:
        """Contiguous runs of backfillable cells as (first business date, last, count)."""
        ranges: list[tuple[date, date, int]] = []
        current: list[Cell] = []
        for cell in (*self.cells, None):
            if cell is not None and cell.backfillable:
                current.append(cell)
                continue
            if current:
                ranges.append((current[0].day, current[-1].day, len(current)))
                current = []
        return ranges


@dataclass(frozen=True)
class AuditRange:
    start_at: datetime
    end_at: datetime
    state: str
    audit_id: int
    reason: str | None


def _audit_ranges(events: Sequence[AuditEvent]) -> list[AuditRange]:
    found: list[AuditRange] = []
    for event in events:
        after = event.after or {}
        try:
            start, end = inputs.instant(str(after["from"])), inputs.instant(str(after["to"]))
        except (KeyError, ValueError, errors.ReportflowError):
            continue
        state = TOO_OLD if event.action == "slots_too_old" else DISABLED
        found.append(AuditRange(start, end, state, event.id, event.reason))
    return found


def plan_cells(schedule: Schedule, kind: PeriodKind, slots: Sequence[tuple[str, date, datetime]],
               runs_by_key: dict[str, Run], ranges: Sequence[AuditRange], now: datetime,
               pruned: Sequence[retention.PrunedRange] = (),
               facts: Mapping[int, calendar_rows.RunFacts] | None = None,
               windows: Sequence[calendars.MaintenanceWindow] = ()) -> tuple[Cell, ...]:
    """Pure: one cell per (key, business date, slot), from its run (and ``facts`` about it) or the reason
    it has none; a period not yet due says when it will not run (a holiday, one of ``windows``)."""
    cells: list[Cell] = []
    for key, day, slot_at in slots:
        run = runs_by_key.get(key)
        if run is not None:
            fact = (facts or {}).get(run.id, calendar_rows.RunFacts())
            quiet = QUIET_REASONS.get(fact.skipped_for or "") if run.status is RunStatus.SUCCESS else None
            cells.append(Cell(key, day, slot_at, run.status.value, run_id=run.id,
                              reason=quiet or dependencies.waiting_for(run) or run.reason or run.error_code,
                              report=fact.has_report,
                              quiet=quiet is not None))
            continue
        if slot_at > now:
            excused = calendars.excuse(schedule.spec, windows, slot_at)
            cells.append(Cell(key, day, slot_at, NOT_YET_DUE, reason=None if excused is None else excused.value))
            continue
        covering = next((r for r in ranges if r.start_at <= slot_at < r.end_at), None)
        if covering is not None:
            cells.append(Cell(key, day, slot_at, covering.state, reason=covering.reason or covering.state.lower(),
                              audit_id=covering.audit_id))
        elif not schedule.enabled and schedule.disabled_at is not None and slot_at >= schedule.disabled_at:
            cells.append(Cell(key, day, slot_at, DISABLED, reason=schedule.disabled_reason or "disabled"))
        elif schedule.created_at is not None and slot_at < schedule.created_at:
            cells.append(Cell(key, day, slot_at, BEFORE_SCHEDULE, reason="before the schedule existed"))
        elif schedule.next_run_at is not None and slot_at >= schedule.next_run_at:
            cells.append(Cell(key, day, slot_at, AWAITING_TICK, reason="due; no scheduler tick yet"))
        elif _was_pruned(key, schedule.spec.timezone, pruned, schedule.spec.sprint):
            cells.append(Cell(key, day, slot_at, PRUNED, reason="pruned (settled history)"))
        else:
            cells.append(Cell(key, day, slot_at, NO_ROW, reason="no row, and no audit says why"))
    return tuple(cells)


def _was_pruned(key: str, timezone: str, pruned: Sequence[retention.PrunedRange], sprint: Sprint | None = None) -> bool:
    """Whether a recorded prune range holds every business date of period ``key``."""
    if not pruned:
        return False
    try:
        first, last = retention.period_dates(key, timezone, sprint)
    except ValueError:
        return False
    return any(r.covers(first, last) for r in pruned)


def _period_slots(schedule: Schedule, kind: PeriodKind, now: datetime, weeks: int,
                  until: datetime | None = None) -> list[tuple[str, date, datetime]]:
    """(key, business date, slot) of every period of the ``weeks`` weeks up to ``until`` (default: now).

    Up to now, the next period due is included too.
    """
    spec = schedule.spec
    zone = ZoneInfo(spec.timezone)
    end = now if until is None or until >= now else until
    today = end.astimezone(zone).date()
    first = today - timedelta(days=weeks * 7 - 1)
    if kind is PeriodKind.SLOT:
        start = end - timedelta(weeks=weeks)
        expected = timetable.estimate_fire_count(spec.cron, spec.timezone, start, end)
        if expected > SLOT_CELL_LIMIT:
            start = end - (end - start) * (SLOT_CELL_LIMIT / expected)
        fires = list(timetable.fires_between(spec.cron, spec.timezone, start, end, dst_gap=spec.dst_gap,
                                        dst_fold=spec.dst_fold))[-SLOT_CELL_LIMIT:]
        upcoming = [] if end < now else timetable.preview(spec.cron, spec.timezone, now, 1, dst_gap=spec.dst_gap,
                                                     dst_fold=spec.dst_fold)
        out = []
        for fire in [*fires, *upcoming]:
            key = policies.business_period(kind, fire.at, spec.timezone, spec.report_on, spec.sprint).key
            out.append((key, fire.local.date(), fire.at))
        return out
    fires = timetable.fires_on_local_dates(spec.cron, spec.timezone, first - timedelta(days=7), today + timedelta(days=8),
                                      dst_gap=spec.dst_gap, dst_fold=spec.dst_fold)
    seen: dict[str, tuple[str, date, datetime]] = {}
    for fire in fires:
        period = policies.business_period(kind, fire.at, spec.timezone, spec.report_on, spec.sprint)
        start_day = period.start_at.astimezone(zone).date()
        if period.key in seen or start_day > today or period.end_at.astimezone(zone).date() <= first:
            continue
        seen[period.key] = (period.key, start_day, fire.at)
    return sorted(seen.values(), key=lambda item: item[2])


def _row(rt: Runtime, schedule: Schedule, now: datetime, weeks: int, until: datetime | None = None) -> CalendarRow:
    kind = rt.workflow(schedule.spec.workflow).period
    slots = _period_slots(schedule, kind, now, weeks, until)
    if not slots:
        return CalendarRow(schedule, kind, ())
    keys = [key for key, _, _ in slots]
    with rt.store.read() as conn:
        found = history_rows.period_runs(conn, schedule.spec.workflow, schedule.spec.project, min(keys), max(keys))
        events = history_rows.slot_audits(conn, schedule.id, ("slots_too_old", "slots_disabled"))
        pruned = pruning.pruned_ranges(conn, schedule.id)
        latest: dict[str, Run] = {}
        for run in found:  # ordered by key, then revision: the latest revision wins
            latest[run.business_key] = run
        facts = calendar_rows.run_facts(conn, [run.id for run in latest.values()])
    windows = calendars.windows_of(schedule, rt.config.maintenance)
    return CalendarRow(schedule, kind, plan_cells(schedule, kind, slots, latest, _audit_ranges(events), now,
                                                  pruned, facts, windows))


def calendar(rt: Runtime, schedule_name: str, *, weeks: int = 13, until: date | None = None) -> CalendarRow:
    """The calendar of one schedule: one cell per business period of the ``weeks`` weeks up to ``until``.

    ``until`` is a local date of the schedule (default: today); any range of its history can be shown.
    """
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, schedule_name)
    end = None
    if until is not None:
        end = datetime.combine(until + timedelta(days=1), datetime.min.time(),
                               ZoneInfo(schedule.spec.timezone)) - timedelta(microseconds=1)
    return _row(rt, schedule, rt.clock.now(), weeks, end)


def project_calendar(rt: Runtime, project: str, *, weeks: int = 13) -> list[CalendarRow]:
    """One calendar row per live schedule of ``project``; NotFound when it has none."""
    with rt.store.read() as conn:
        found = [s for s in schedule_rows.list_schedules(conn) if s.spec.project == project]
    if not found:
        raise errors.NotFound(f"no schedule for project '{project}'")
    now = rt.clock.now()
    return [_row(rt, schedule, now, weeks) for schedule in found]


@dataclass(frozen=True)
class MonthDay:
    """One day of the month grid: its date, whether it belongs to the month shown, and its periods' cells."""

    day: date
    in_month: bool
    today: bool
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class MonthGrid:
    """A schedule's month as weeks of seven days (Monday first), and the row it was laid out from."""

    row: CalendarRow
    first: date  # the 1st of the month shown
    weeks: tuple[tuple[MonthDay, ...], ...]


def grid_span(first: date) -> tuple[date, date]:
    """The Monday on or before the 1st of ``first``'s month and the Sunday on or after its last day."""
    start = first.replace(day=1)
    last = (start + timedelta(days=31)).replace(day=1) - timedelta(days=1)
    return start - timedelta(days=start.weekday()), last + timedelta(days=6 - last.weekday())


def plan_month(cells: Sequence[Cell], first: date, today: date) -> tuple[tuple[MonthDay, ...], ...]:
    """Pure: the weeks of ``first``'s month, each day holding the cells whose business date it is.

    The leading and trailing days of the neighbouring months are kept (``in_month`` False) with their
    cells, so a week is always whole; a weekly period sits on the day it starts.
    """
    start, end = grid_span(first)
    by_day: dict[date, list[Cell]] = {}
    for cell in cells:
        by_day.setdefault(cell.day, []).append(cell)
    days = [start + timedelta(days=n) for n in range((end - start).days + 1)]
    laid = [MonthDay(d, d.month == first.month, d == today, tuple(by_day.get(d, ()))) for d in days]
    return tuple(tuple(laid[n:n + 7]) for n in range(0, len(laid), 7))


def month(rt: Runtime, schedule_name: str, first: date) -> MonthGrid:
    """The month of ``first`` (a local date of the schedule) as a grid; days after today have no cells but
    the next one due."""
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, schedule_name)
    zone = ZoneInfo(schedule.spec.timezone)
    now = rt.clock.now()
    today = now.astimezone(zone).date()
    start, end = grid_span(first)
    until = min(end, today)
    if until < start:
        return MonthGrid(CalendarRow(schedule, rt.workflow(schedule.spec.workflow).period, ()), first.replace(day=1),
                         plan_month((), first, today))
    weeks = (until - start).days // 7 + 1
    end_at = datetime.combine(until + timedelta(days=1), datetime.min.time(), zone) - timedelta(microseconds=1)
    row = _row(rt, schedule, now, weeks, end_at)
    shown = tuple(c for c in row.cells if start <= c.day <= end)
    row = CalendarRow(row.schedule, row.period, shown)
    return MonthGrid(row, first.replace(day=1), plan_month(shown, first, today))
