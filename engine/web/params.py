"""Query parameters of the pages (and ``/api/runs``): bad values are ``InvalidInput`` (400)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from engine.core import alerts, errors, inputs
from engine.core.models import RunStatus, RunTrigger
from engine.read import run_queries
from engine.runtime import Runtime
from engine.store import alert_rows, history_rows


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


SPANS = ("month", "13w", "year")


@dataclass(frozen=True)
class CalendarRange:
    """Which stretch of a schedule's calendar the page shows (a month grid, 13 weeks or a year as a strip of
    cells), and the links to the neighbouring ones."""

    span: str  # one of SPANS
    until: date  # the strip's last day
    today: date
    month: date  # the 1st of the month the grid shows

    @property
    def year(self) -> bool:
        """Whether this is the year at a glance."""
        return self.span == "year"

    @property
    def weeks(self) -> int:
        """The strip's length in weeks."""
        return 53 if self.year else 13

    @property
    def earlier(self) -> date:
        """The previous stretch's end."""
        return self.until - timedelta(weeks=self.weeks)

    @property
    def later(self) -> date | None:
        """The next stretch's end, or None when this one reaches today."""
        return None if self.until >= self.today else min(self.until + timedelta(weeks=self.weeks), self.today)

    @property
    def previous_month(self) -> date:
        """The 1st of the month before the one shown."""
        return (self.month - timedelta(days=1)).replace(day=1)

    @property
    def next_month(self) -> date | None:
        """The 1st of the month after the one shown, or None when the one shown is this month."""
        after = (self.month + timedelta(days=31)).replace(day=1)
        return None if after > self.today else after


def _month(text: str | None, today: date) -> date:
    """``YYYY-MM`` as the 1st of that month (default and upper bound: this month); bad values are 400."""
    this_month = today.replace(day=1)
    if not text:
        return this_month
    parts = text.split("-")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts) or len(parts[0]) != 4:
        raise errors.InvalidInput(f"month '{text[:20]}' is not YYYY-MM")
    year, number = int(parts[0]), int(parts[1])
    if not 1 <= number <= 12:
        raise errors.InvalidInput(f"month '{text[:20]}' is not YYYY-MM")
    if year < 1970:
        raise errors.InvalidInput(f"month '{text[:20]}' is before 1970")
    return min(date(year, number, 1), this_month)


def calendar_range(params: Any, today: date) -> CalendarRange:
    """``?month=YYYY-MM`` (the default: this month's grid) or ``?span=13w|year&until=YYYY-MM-DD``; bad values
    are 400."""
    span = params.get("span") or "month"
    if span not in SPANS:
        raise errors.InvalidInput(f"span '{span[:20]}' is not {', '.join(SPANS[:-1])} or {SPANS[-1]}")
    until = parse_date(params.get("until"), "until") or today
    if until > today:
        until = today
    if until < date(1970, 1, 1):
        raise errors.InvalidInput(f"until '{until}' is before 1970")
    return CalendarRange(span, until, today, _month(params.get("month"), today))


def alert_filter(params: Any) -> tuple[alert_rows.AlertFilter, int | None]:
    """The alerts page's filter (``severity``, ``schedule``, ``delivery``; several of a kind allowed) and its
    ``before`` cursor; bad values are 400."""
    severities = tuple(s.lower() for s in params.getlist("severity") if s)
    for value in severities:
        if value not in alerts.Severity.__members__.values():
            raise errors.InvalidInput(f"unknown severity '{value[:20]}'")
    delivery = tuple(s.lower() for s in params.getlist("delivery") if s)
    for value in delivery:
        if value not in alert_rows.DELIVERY_STATES:
            raise errors.InvalidInput(f"unknown delivery state '{value[:20]}' (one of: "
                                      f"{', '.join(alert_rows.DELIVERY_STATES)})")
    before: str | None = params.get("before") or None
    try:
        cursor = inputs.run_id(before) if before is not None else None  # a positive row id, like a run's
    except errors.InvalidInput:
        raise errors.InvalidInput(f"before '{str(before)[:20]}' is not a page of alerts (follow the page's own "
                                  "link)") from None
    return alert_rows.AlertFilter(severities, params.get("schedule") or None, delivery), cursor
