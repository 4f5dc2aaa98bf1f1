"""Read-only queries for run history: keyset pages, period ranges, slot audit ranges.

Pages are keyset-paged on ``(scheduled_for DESC, id DESC)``: the next page
starts strictly after the last row of the previous one, so a page costs the
same at row 100 and at row 100,000 (no OFFSET scan).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from sqlalchemy import and_, not_, or_, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from engine.core import period_keys
from engine.core.audit import AuditEvent
from engine.core.models import PeriodKind, Run, StepStatus
from engine.store import rows
from engine.store.tables import audit_events, runs, schedules, steps


@dataclass(frozen=True)
class RunFilter:
    """What the runs page and ``/api/runs`` filter on; every field optional."""

    statuses: tuple[str, ...] = ()
    schedule_id: int | None = None
    project: str | None = None
    trigger: str | None = None
    date_from: date | None = None  # business date, inclusive
    date_to: date | None = None  # business date, inclusive


def _date_clause(first: date | None, last: date | None) -> ColumnElement[bool]:
    """Business keys are ``YYYY-MM-DD``, ``YYYY-Www``, ``YYYY-MM``, ``YYYY-Qn`` or ``YYYY-MM-DDTHH:MMZ``: each sorts
    as text within its kind, so each kind's keys are compared with the keys of ``first`` and ``last``."""
    key = runs.c.business_key
    is_week, is_quarter = key.like(period_keys.WEEK_LIKE), key.like(period_keys.QUARTER_LIKE)
    is_month = and_(key.like(period_keys.MONTH_LIKE), not_(is_quarter))
    parts: dict[PeriodKind, list[ColumnElement[bool]]] = {kind: [] for kind in (
        PeriodKind.DAY, PeriodKind.WEEK, PeriodKind.MONTH, PeriodKind.QUARTER)}
    for kind, bounds in parts.items():
        if first is not None:
            bounds.append(key >= period_keys.format(kind, first))
        if last is not None:
            bounds.append(key < period_keys.format(kind, last + timedelta(days=1)) if kind is PeriodKind.DAY
                          else key <= period_keys.format(kind, last))
    # A sprint's dates need its schedule's sprint: here a sprint is kept by the year it starts in.
    is_sprint = key.like(period_keys.SPRINT_LIKE)
    sprints = [*([key >= f"{first.year:04d}-S00"] if first is not None else []),
               *([key <= f"{last.year:04d}-S99"] if last is not None else [])]
    return or_(and_(not_(is_week), not_(is_month), not_(is_quarter), not_(is_sprint), *parts[PeriodKind.DAY]),
               and_(is_week, *parts[PeriodKind.WEEK]), and_(is_month, *parts[PeriodKind.MONTH]),
               and_(is_quarter, *parts[PeriodKind.QUARTER]), and_(is_sprint, *sprints))


def page_runs(conn: Connection, filt: RunFilter, *, after: tuple[datetime, int] | None, limit: int) -> list[Run]:
    """Up to ``limit`` runs, newest slot first, strictly after the keyset position ``after``.

    Child runs are not rows of their own: each comes with its parent (``children_of``).
    """
    query = (select(runs, schedules.c.name.label("schedule_name"))
             .select_from(runs.outerjoin(schedules, runs.c.schedule_id == schedules.c.id))
             .where(runs.c.parent_id.is_(None))
             .order_by(runs.c.scheduled_for.desc(), runs.c.id.desc()).limit(limit))
    if filt.statuses:
        query = query.where(runs.c.status.in_(list(filt.statuses)))
    if filt.schedule_id is not None:
        query = query.where(runs.c.schedule_id == filt.schedule_id)
    if filt.project is not None:
        query = query.where(runs.c.project == filt.project)
    if filt.trigger is not None:
        query = query.where(runs.c.trigger_type == filt.trigger)
    if filt.date_from is not None or filt.date_to is not None:
        query = query.where(_date_clause(filt.date_from, filt.date_to))
    if after is not None:
        at, run_id = after
        query = query.where(or_(runs.c.scheduled_for < at, and_(runs.c.scheduled_for == at, runs.c.id < run_id)))
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


def children_of(conn: Connection, parent_ids: Sequence[int]) -> dict[int, list[Run]]:
    """The child runs of each of ``parent_ids``, in creation order (parents without any are left out)."""
    found: dict[int, list[Run]] = {}
    if not parent_ids:
        return found
    query = select(runs).where(runs.c.parent_id.in_(list(parent_ids))).order_by(runs.c.id)
    for row in conn.execute(query).mappings():
        found.setdefault(int(row["parent_id"]), []).append(rows.run_from_row(row))
    return found


def period_runs(conn: Connection, workflow: str, project: str, first_key: str, last_key: str) -> list[Run]:
    """Every run of (workflow, project) whose business key lies in [first_key, last_key], by key and revision.

    A range on ``base_key`` (``workflow:project:key``), so the base-key index serves it.
    """
    prefix = f"{workflow}:{project}:"
    query = (select(runs, schedules.c.name.label("schedule_name"))
             .select_from(runs.outerjoin(schedules, runs.c.schedule_id == schedules.c.id))
             .where(runs.c.base_key >= prefix + first_key, runs.c.base_key <= prefix + last_key,
                    runs.c.parent_id.is_(None))  # a child's key extends its parent's: the parent is the period's run
             .order_by(runs.c.base_key, runs.c.revision))
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


def slot_audits(conn: Connection, schedule_id: int, actions: Sequence[str]) -> list[AuditEvent]:
    """A schedule's audit events of the given actions (e.g. ``slots_too_old``), oldest first."""
    query = (select(audit_events).where(audit_events.c.schedule_id == schedule_id,
                                        audit_events.c.action.in_(list(actions)))
             .order_by(audit_events.c.id))
    return [AuditEvent(**dict(r)) for r in conn.execute(query).mappings()]


def run_audit(conn: Connection, run_id: int) -> list[AuditEvent]:
    """The audit events of one run, oldest first."""
    query = select(audit_events).where(audit_events.c.run_id == run_id).order_by(audit_events.c.id)
    return [AuditEvent(**dict(r)) for r in conn.execute(query).mappings()]


def step_durations(conn: Connection, workflow: str, step: str, *, schedule_id: int | None = None,
                   limit: int = 50) -> list[float]:
    """Seconds each of the newest ``limit`` successful ``step`` executions of ``workflow`` took, newest first
    (one schedule's when ``schedule_id`` is given)."""
    query = (select(steps.c.started_at, steps.c.finished_at)
             .join(runs, runs.c.id == steps.c.run_id)
             .where(runs.c.workflow == workflow, steps.c.name == step, steps.c.status == StepStatus.SUCCESS.value,
                    steps.c.started_at.is_not(None), steps.c.finished_at.is_not(None))
             .order_by(steps.c.finished_at.desc()).limit(limit))
    if schedule_id is not None:
        query = query.where(runs.c.schedule_id == schedule_id)
    return [max(0.0, (finished - started).total_seconds()) for started, finished in conn.execute(query)]
