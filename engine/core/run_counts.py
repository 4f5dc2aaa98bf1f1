"""The creation policy (``[limits] warn_runs_per_day``, ``max_runs_per_day``): how many runs a schedule makes
a day and a month, what that asks of a model, and whether it is allowed.

Counts come from enumerating the cron over one calendar month in the schedule's own zone, DST included
(a minutely schedule makes 60 runs fewer in the month whose clocks go forward, an hourly one a run
more or fewer on the day they change), so they are the runs the tick would create, not an average.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from statistics import median

from engine.core.cron import expression, timetable
from engine.core.schedule_spec import DstFold, DstGap, ScheduleSpec

#: Above this many runs on a schedule's busiest day, ``apply``, ``validate`` and ``draft`` warn.
DEFAULT_WARN_RUNS_PER_DAY = 48


@dataclass(frozen=True)
class RunCounts:
    """One calendar month of a schedule: its runs, and its busiest local day's."""

    month: date  # the month's first day
    per_month: int
    per_day: int  # the busiest local day of the month

    def describe(self) -> str:
        """One line: the busiest day's runs and the month's; a schedule that runs on fewer days than a month has
        says how often it runs (``1 run a week``), not "1 runs/day"."""
        month = f"{self.per_month:,} run{'' if self.per_month == 1 else 's'} in {self.month:%B %Y}"
        if self.per_day == 1 and self.per_month <= 6:  # once on a few days of the month: weekly or rarer
            often = ("1 run a week" if self.per_month >= 4 else "1 run a month" if self.per_month == 1
                     else "at most 1 run a day, on a few days")
            return f"{often}, {month}"
        if self.per_month == 0:  # a quarterly in a month it does not run in
            return f"no run in {self.month:%B %Y}"
        return f"{self.per_day:,} run{'' if self.per_day == 1 else 's'} a day at most, {month}"


def month_of(instant: datetime, tz: str) -> date:
    """The first day of the local month holding ``instant``."""
    return instant.astimezone(expression.zone(tz)).date().replace(day=1)


def count_month(expr: str, tz: str, month: date, *, dst_gap: DstGap = DstGap.SHIFT,
                dst_fold: DstFold = DstFold.FIRST) -> RunCounts:
    """The runs of ``expr`` in the local calendar month starting ``month`` (its first day), by enumeration."""
    first = month.replace(day=1)
    last = (first + timedelta(days=32)).replace(day=1) - timedelta(days=1)
    fires = timetable.fires_on_local_dates(expr, tz, first, last, dst_gap=dst_gap, dst_fold=dst_fold)
    by_day = Counter(fire.local.date() for fire in fires)
    return RunCounts(month=first, per_month=len(fires), per_day=max(by_day.values(), default=0))


@dataclass(frozen=True)
class Verdict:
    """``refused``: above ``max_runs_per_day``; ``warning``: the line to show above ``warn_runs_per_day``."""

    refused: str | None
    warning: str | None


def decide(name: str, counts: RunCounts, *, warn_per_day: int, max_per_day: int | None) -> Verdict:
    """The creation policy for schedule ``name``: refuse above the maximum, warn above the warning level."""
    if max_per_day is not None and counts.per_day > max_per_day:
        return Verdict(f"schedule '{name}' makes {counts.per_day:,} runs on its busiest day, above "
                       f"[limits] max_runs_per_day = {max_per_day:,}", None)
    if counts.per_day > warn_per_day:
        return Verdict(None, f"schedule '{name}' makes {counts.per_day:,} runs/day ({counts.per_month:,} a month), "
                             f"above [limits] warn_runs_per_day = {warn_per_day:,}")
    return Verdict(None, None)


def model_time(durations_s: list[float], per_month: int) -> str:
    """The model time a month of runs asks for: the median recorded generation times the runs, or why not.

    The median, not the mean: one generation that waited out a cold model load would make every month look long.
    """
    if not durations_s:
        return "model time: no generation recorded yet"
    typical = median(durations_s)
    hours = typical * per_month / 3600
    return (f"model time: about {hours:,.1f} h a month ({typical:,.0f} s median of the last {len(durations_s)} "
            f"generations x {per_month:,} runs)")


def describe(specs: list[ScheduleSpec], now: datetime, *, warn_per_day: int,
             max_per_day: int | None) -> tuple[dict[str, RunCounts], list[str], list[str]]:
    """For ``apply``: each schedule's counts in the month of ``now`` (and as one line each), and the policy's
    warnings."""
    counted: dict[str, RunCounts] = {}
    lines: list[str] = []
    warnings: list[str] = []
    for spec in specs:
        counts = count_month(spec.cron, spec.timezone, month_of(now, spec.timezone), dst_gap=spec.dst_gap,
                             dst_fold=spec.dst_fold)
        counted[spec.name] = counts
        lines.append(f"{spec.name}: {counts.describe()}")
        verdict = decide(spec.name, counts, warn_per_day=warn_per_day, max_per_day=max_per_day)
        warnings += [text for text in (verdict.refused, verdict.warning) if text]
    return counted, lines, warnings


def check_cron(expr: str, tz: str, now: datetime) -> tuple[RunCounts, str | None]:
    """For ``schedules validate`` (no config read): the month of ``now``, and a warning above the default level."""
    counts = count_month(expr, tz, month_of(now, tz))
    return counts, decide(expr, counts, warn_per_day=DEFAULT_WARN_RUNS_PER_DAY, max_per_day=None).warning
