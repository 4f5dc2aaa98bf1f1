"""Query parameters shared by the runs page and ``/api/runs``: bad values are ``InvalidInput`` (400)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from engine.core import errors, inputs
from engine.core.models import RunStatus, RunTrigger
from engine.read import run_queries
from engine.runtime import Runtime
from engine.store import history_rows


def parse_date(text: str | None, name: str) -> date | None:
    """A query parameter as a date (None when empty); raises InvalidInput for anything else."""
    if not text:
        return None
    return inputs.day(text, name)


def run_filter(rt: Runtime, params: Any) -> tuple[history_rows.RunFilter, dict[str, str]]:
    """The runs filter from query parameters (shared by the page and ``/api/runs``); bad values are 400."""
    statuses = tuple(s.upper() for s in params.getlist("status") if s)
    for value in statuses:
        if value not in RunStatus.__members__:
            raise errors.InvalidInput(f"unknown status '{value}'")
    trigger = (params.get("trigger") or "").upper() or None
    if trigger is not None and trigger not in RunTrigger.__members__:
        raise errors.InvalidInput(f"unknown trigger '{trigger}'")
    schedule = params.get("schedule") or None
    filt = history_rows.RunFilter(
        statuses=statuses, schedule_id=run_queries.schedule_id(rt, schedule) if schedule else None,
        project=params.get("project") or None, trigger=trigger,
        date_from=parse_date(params.get("from"), "from"), date_to=parse_date(params.get("to"), "to"))
    echo = {k: v for k, v in (("schedule", schedule), ("project", filt.project), ("trigger", trigger),
                              ("from", params.get("from")), ("to", params.get("to"))) if v}
    return filt, echo


@dataclass(frozen=True)
class CalendarRange:
    """Which stretch of a schedule's calendar the page shows, and the links to the neighbouring ones."""

    weeks: int
    until: date
    today: date

    @property
    def year(self) -> bool:
        """Whether this is the year at a glance (rather than the 13-week view)."""
        return self.weeks > 13

    @property
    def earlier(self) -> date:
        """The previous stretch's end."""
        return self.until - timedelta(weeks=self.weeks)

    @property
    def later(self) -> date | None:
        """The next stretch's end, or None when this one reaches today."""
        return None if self.until >= self.today else min(self.until + timedelta(weeks=self.weeks), self.today)


def calendar_range(params: Any, today: date) -> CalendarRange:
    """``?until=YYYY-MM-DD&span=year|13w`` (default: 13 weeks up to today); bad values are 400."""
    span = params.get("span") or "13w"
    if span not in ("13w", "year"):
        raise errors.InvalidInput(f"span '{span}' is not 13w or year")
    until = parse_date(params.get("until"), "until") or today
    if until > today:
        until = today
    if until < date(1970, 1, 1):
        raise errors.InvalidInput(f"until '{until}' is before 1970")
    return CalendarRange(53 if span == "year" else 13, until, today)
