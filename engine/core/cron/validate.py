"""Schedule checks (SPEC §3): what ``schedules validate`` reports and what a config must pass.

Pure: no I/O and no clock; ``now`` comes in (config checks use a fixed reference instant).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from itertools import groupby, islice, takewhile
from zoneinfo import ZoneInfo

from engine.core import errors, period_keys
from engine.core.cron import expression, timetable
from engine.core.models import PeriodKind
from engine.core.schedule_spec import DstFold, DstGap, ReportOn, ScheduleSpec

_REFERENCE = datetime(2026, 1, 1, tzinfo=UTC)  # check_schedule's "now": validity never depends on the clock


@dataclass(frozen=True)
class CronCheck:
    """The validation summary of a schedule (SPEC §3): figures, next fires, problems."""

    runs_per_day: float
    min_interval: timedelta | None
    next_fires: list[timetable.Fire]
    problems: list[tuple[str, str]]  # (config field, problem)

    @property
    def ok(self) -> bool:
        """True when the expression has no problems."""
        return not self.problems


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
    parsed, zone_info, start = timetable.prepare(expr, tz, now)
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
    upcoming = timetable.stream(parsed, zone_info, start + timetable.TICK, horizon, dst_gap, dst_fold)
    sample = list(islice(takewhile(lambda f: f.at <= horizon, upcoming), 2000))
    gaps = [b.at - a.at for a, b in zip(sample, sample[1:], strict=False)]
    shortest = min(gaps, default=None)
    if shortest is not None and shortest < min_interval and not allow_frequent:
        how = f"every {_fmt(shortest)}" if max(gaps) == shortest else f"as little as {_fmt(shortest)} apart"
        limit = _fmt(min_interval)
        problems.append(("cron", f"fires {how}; the minimum interval is {limit} (set allow_frequent = true)"))
    next_fires = timetable.preview(expr, tz, start, 5, dst_gap=dst_gap, dst_fold=dst_fold)
    if not next_fires:
        problems.append(("cron", "never fires: every slot falls in a DST gap that dst_gap = \"skip\" drops"))
    # A sprint's cron says when to look (a cron cannot count fourteen days): the first fire after a sprint ends
    # reports it, and later fires of the next sprint find it reported (``tick``: already present).
    if period not in (PeriodKind.SLOT, PeriodKind.SPRINT):
        problem = _period_problem(parsed, zone_info, start, period, dst_gap, dst_fold, kind)
        if problem:
            problems.append(("cron", problem))
    return CronCheck(runs_per_day=expression.runs_per_day(parsed, start.astimezone(zone_info).date()),
                     min_interval=shortest, next_fires=next_fires, problems=problems)


def _period_problem(parsed: expression.Parsed, tz: ZoneInfo, now: datetime, period: PeriodKind,
                    gap: DstGap, fold: DstFold, kind: str) -> str | None:
    """The first period within ~400 days (from the first whole one) holding more than one fire."""
    today = now.astimezone(tz).date()
    first = today + expression.DAY if period is PeriodKind.DAY else today + timedelta(days=7 - today.weekday())
    begin = timetable.earliest(tz, datetime.combine(first, time()))
    stop = begin + timedelta(days=400)
    # Fires come in time order, so a period's fires are consecutive: stop at the first crowded one.
    fires = takewhile(lambda f: f.at <= stop, timetable.stream(parsed, tz, begin, stop, gap, fold))
    for key, group in groupby(fires, lambda f: period_keys.format(period, f.local.date())):
        count = sum(1 for _ in group)
        if count > 1:
            where = f"on {key}" if period is PeriodKind.DAY else f"in {key}"
            unit = {PeriodKind.DAY: "day", PeriodKind.WEEK: "ISO week"}.get(period, period.value)
            return f"fires {count} times {where}; {kind} allows one slot per {unit}"
    return None


def check_schedule(spec: ScheduleSpec, period: PeriodKind, *, now: datetime | None = None) -> CronCheck:
    """Config-time validation: ConfigInvalid (keyed by field) for the first problem, else the summary.

    Without ``now`` a fixed reference instant is used, so validity never depends on the clock.
    """
    for key, probe in (("cron", lambda: expression.check_expression(spec.cron)), ("timezone", lambda: expression.zone(spec.timezone))):
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
    for fire in timetable.preview(spec.cron, spec.timezone, now, 20, dst_gap=spec.dst_gap, dst_fold=spec.dst_fold):
        local = fire.local
        starts_day = (local.hour, local.minute, local.second) == (0, 0, 0)
        if starts_day and (period is PeriodKind.DAY or local.weekday() == 0):
            unit = "day" if period is PeriodKind.DAY else "ISO week"
            return (f'report_on = "current" with a slot at the start of its {unit} ({local:%a %H:%M}) reports an '
                    f'empty window; use "previous" (the {unit} before the slot) or "interval" (since the previous slot)')
    return None
