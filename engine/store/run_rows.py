"""Run rows outside the worker's hot path: creation, reading, operator actions, reconciler queries.

Claims and step checkpoints live in ``engine.store.claims``; recovery writes in
``engine.store.recovery``. Status changes here repeat the transition table's
guard in SQL (``_guarded_status``); a guard that matches no row raises
``InvalidTransition`` (or ``NotFound``) so the caller's transaction rolls back
and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, exists, func, or_, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from engine.core import errors, inputs, policies, transitions
from engine.core.models import (
    ACTIVE_STATUSES,
    BUSY_STATUSES,
    CLAIMABLE_STATUSES,
    HOLDABLE_STATUSES,
    PRIORITY,
    AttemptTrigger,
    NewRun,
    Run,
    RunStatus,
    RunTrigger,
    StepStatus,
)
from engine.store import rows
from engine.store.tables import artifacts, attempts, runs, schedules, steps

_ACTIVE = [s.value for s in ACTIVE_STATUSES]
IN_LIST_BATCH = 500  # values per expanding IN list: far below SQLite's and psycopg's parameter limits


def dialect_insert(conn: Connection) -> Any:
    """The dialect's INSERT construct (it has ON CONFLICT on both SQLite and PostgreSQL).

    The PostgreSQL dialect is imported here, not at module level: a SQLite process
    (a cron ``tick``) does not pay for it, and a PostgreSQL engine has loaded it already.
    """
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    return sqlite_insert


def _insert_or_nothing(conn: Connection) -> Any:
    # Built once per dialect and executed with parameters, so SQLAlchemy's statement cache applies.
    # Each returned row names its key, so the rows' order does not matter (asking SQLAlchemy to
    # keep the parameters' order cost ~40% more per row on SQLite).
    return dialect_insert(conn)(runs).on_conflict_do_nothing().returning(runs.c.id, runs.c.idempotency_key)


def _columns(new: NewRun) -> dict[str, Any]:
    # A new run has made no attempt, holds no lease and has fence 0.
    return {"schedule_id": new.schedule_id, "parent_id": new.parent_id, "workflow": new.workflow,
            "project": new.project, "trigger_type": new.trigger.value, "scheduled_for": new.scheduled_for,
            "business_key": new.business_key, "base_key": new.base_key, "idempotency_key": new.idempotency_key,
            "revision": new.revision, "status": new.status.value,
            "reason": None if new.reason is None else new.reason.value, "priority": new.priority,
            "schedule_priority": new.schedule_priority, "not_before": new.not_before, "pinned": new.pinned, "attempt_count": 0, "max_attempts": new.max_attempts,
            "max_runtime_s": new.max_runtime_s, "created_at": new.created_at, "fence": 0, "cancel_requested": False,
            "upstream": [list(pair) for pair in new.upstream] or None, "upstream_until": new.upstream_until}


def insert_run(conn: Connection, new: NewRun) -> int | None:
    """Insert a run unless its slot or idempotency key already has one (``ON CONFLICT DO NOTHING``).

    Returns the new id, or None when another row already handles that period.
    """
    row = conn.execute(_insert_or_nothing(conn), _columns(new)).first()
    return None if row is None else int(row[0])


def insert_runs(conn: Connection, new: Sequence[NewRun]) -> dict[str, int]:
    """Insert many runs in one statement, each doing nothing on conflict; returns {key: id} of those inserted."""
    if not new:
        return {}
    result = conn.execute(_insert_or_nothing(conn), [_columns(r) for r in new])
    return {key: int(run_id) for run_id, key in result.all()}


_KEYS_PRESENT = select(runs.c.base_key).where(runs.c.base_key.in_(bindparam("b_keys", expanding=True)))


_OVERLAP_COUNTS_OF = (select(runs.c.schedule_id, runs.c.status, func.count())
                      .where(runs.c.schedule_id.in_(bindparam("b_schedules", expanding=True)),
                             runs.c.trigger_type == RunTrigger.SCHEDULED.value, runs.c.status.in_(_ACTIVE))
                      .group_by(runs.c.schedule_id, runs.c.status))


def overlap_counts_of(conn: Connection, schedule_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """(active, pending) SCHEDULED runs of each schedule, what overlap policies count; a schedule
    with no active run is left out."""
    active: dict[int, int] = {}
    pending: dict[int, int] = {}
    for start in range(0, len(schedule_ids), IN_LIST_BATCH):
        chunk = list(schedule_ids[start:start + IN_LIST_BATCH])
        for schedule_id, status, count in conn.execute(_OVERLAP_COUNTS_OF, {"b_schedules": chunk}):
            active[schedule_id] = active.get(schedule_id, 0) + count
            if status == RunStatus.PENDING.value:
                pending[schedule_id] = count
    return {schedule_id: (n, pending.get(schedule_id, 0)) for schedule_id, n in active.items()}


def _guarded_status(conn: Connection, run_id: int, target: RunStatus, **values: Any) -> None:
    allowed = [s.value for s in transitions.sources(target)]
    result = conn.execute(update(runs).where(runs.c.id == run_id, runs.c.status.in_(allowed))
                          .values(status=target.value, **values))
    if result.rowcount != 1:
        current = conn.execute(select(runs.c.status).where(runs.c.id == run_id)).scalar()
        if current is None:
            raise errors.NotFound(f"no run {run_id}")
        raise errors.InvalidTransition(f"run {run_id}", current, target.value)


# --- a run's schedule, children included ---------------------------------------

def family_schedule_id(table: Any = runs) -> Any:
    """SQL: the schedule whose work a run is: its own, or its parent's for a child run (which has none)."""
    parent = runs.alias("family_parent")
    return func.coalesce(table.c.schedule_id,
                         select(parent.c.schedule_id).where(parent.c.id == table.c.parent_id)
                         .correlate(table).scalar_subquery())


def family_schedule_enabled(table: Any = runs) -> Any:
    """SQL: whether that schedule is enabled (NULL for a run of no schedule): the kill switch's rule (§15.3)."""
    family = schedules.alias("family_schedule")
    return select(family.c.enabled).where(family.c.id == family_schedule_id(table)).scalar_subquery()


def family_schedule_disabled(table: Any = runs) -> Any:
    """SQL: true when that schedule is disabled: the run is held (a run of no schedule never is)."""
    family = schedules.alias("family_schedule")
    return exists().where(family.c.id == family_schedule_id(table), family.c.enabled.is_(False))


def follow_schedule_priority(conn: Connection, schedule_id: int, rank: int) -> None:
    """Give the schedule's runs that are not RUNNING nor finished (its families' children too) ``rank``.

    A claim reads the rank from the run's row (its index's first key), so a changed
    ``priority`` reaches the runs already waiting here (SPEC §18).
    """
    waiting = [s.value for s in ACTIVE_STATUSES if s is not RunStatus.RUNNING]
    conn.execute(update(runs).where(family_schedule_id() == schedule_id, runs.c.status.in_(waiting),
                                    runs.c.schedule_priority != rank).values(schedule_priority=rank))


# --- reading ---------------------------------------------------------------

def _run_query() -> Any:
    return select(runs, schedules.c.name.label("schedule_name"),
                  family_schedule_enabled().label("schedule_enabled")).select_from(
        runs.outerjoin(schedules, runs.c.schedule_id == schedules.c.id))


def get_run(conn: Connection, run_id: int, *, detail: bool = True) -> Run:
    """One run (with its steps, attempts and artifacts unless ``detail`` is False); raises NotFound."""
    row = conn.execute(_run_query().where(runs.c.id == run_id)).mappings().first()
    if row is None:
        raise errors.NotFound(f"no run {run_id} (see `reportflow runs list`)")
    if not detail:
        return rows.run_from_row(row)
    step_rows = conn.execute(select(steps).where(steps.c.run_id == run_id).order_by(steps.c.position)).mappings()
    attempt_rows = conn.execute(select(attempts).where(attempts.c.run_id == run_id)
                                .order_by(attempts.c.number)).mappings()
    artifact_rows = conn.execute(select(artifacts).where(artifacts.c.run_id == run_id)
                                 .order_by(artifacts.c.id)).mappings()
    return rows.run_from_row(row, steps=tuple(rows.step_from_row(r) for r in step_rows),
                             attempts=tuple(rows.attempt_from_row(r) for r in attempt_rows),
                             artifacts=tuple(rows.artifact_from_row(r) for r in artifact_rows))


def find_period_runs(conn: Connection, workflow: str, project: str, business_key: str) -> list[Run]:
    """Every revision of a business period, revision 1 first."""
    query = _run_query().where(runs.c.base_key == policies.base_key(workflow, project, business_key)).order_by(runs.c.revision)
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


def existing_keys(conn: Connection, base_keys: Sequence[str]) -> set[str]:
    """Which of ``base_keys`` have a run (in batches, for a backfill)."""
    found: set[str] = set()
    for start in range(0, len(base_keys), IN_LIST_BATCH):
        chunk = base_keys[start:start + IN_LIST_BATCH]
        found.update(conn.execute(_KEYS_PRESENT, {"b_keys": list(chunk)}).scalars())
    return found


def list_runs(conn: Connection, *, statuses: Iterable[str] = (), schedule_id: int | None = None,
              limit: int | None = 200, parent_id: int | None = None, by_created: bool = False) -> list[Run]:
    """Runs newest slot first (``by_created``: newest made first: a backfill of last year shows above yesterday's
    run); ``parent_id``: only that run's children (SPEC §17)."""
    query = _run_query().order_by(runs.c.id.desc()) if by_created else \
        _run_query().order_by(runs.c.scheduled_for.desc(), runs.c.id.desc())
    if parent_id is not None:
        query = query.where(runs.c.parent_id == parent_id)
    status_list = list(statuses)
    if status_list:
        query = query.where(runs.c.status.in_(status_list))
    if schedule_id is not None:
        query = query.where(runs.c.schedule_id == schedule_id)
    if limit:
        query = query.limit(limit)
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


# --- operator actions --------------------------------------------------------

def requeue(conn: Connection, run: Run, *, trigger: AttemptTrigger, now: datetime,
            from_step: str | None = None, step_names: Sequence[str] = (), fresh_budget: int | None = None) -> None:
    """Queue ``run`` again as a new attempt (retry, backfill, trigger, approve).

    ``from_step`` resets that step and the later ones to PENDING so they execute
    again; earlier SUCCESS steps keep their outputs. ``fresh_budget`` gives the
    run that many more attempts (a manual retry starts a fresh budget).
    """
    values: dict[str, Any] = dict(priority=PRIORITY[trigger], next_attempt_trigger=trigger.value,
                                  not_before=None, completed_at=None, cancel_requested=False, reason=None)
    if fresh_budget is not None:
        values["max_attempts"] = run.attempt_count + fresh_budget
    _guarded_status(conn, run.id, RunStatus.QUEUED, **values)
    if from_step is not None and from_step in step_names:
        position = list(step_names).index(from_step)
        conn.execute(update(steps).where(steps.c.run_id == run.id, steps.c.position >= position).values(
            status=StepStatus.PENDING.value, error_code=None, error_message=None))
    elif from_step is None:
        conn.execute(update(steps).where(steps.c.run_id == run.id, steps.c.status == StepStatus.FAILED.value)
                     .values(status=StepStatus.PENDING.value))


#: A run that waits for its upstream schedules (not a parent waiting for its children): it has not started.
WAITING_FOR_UPSTREAM = (runs.c.status == RunStatus.WAITING.value) & runs.c.upstream_until.is_not(None)


def unstarted_runs(conn: Connection, schedule_id: int) -> list[Run]:
    """The schedule's runs that have not started (what disabling it holds), in claim order: waiting for a worker
    or for an upstream schedule (a parent WAITING for its children has started)."""
    parents = runs.alias("parents")
    of_schedule = or_(runs.c.schedule_id == schedule_id,  # and its families' children: its work too
                      runs.c.parent_id.in_(select(parents.c.id).where(parents.c.schedule_id == schedule_id)))
    unstarted = or_(runs.c.status.in_([s.value for s in HOLDABLE_STATUSES]), WAITING_FOR_UPSTREAM)
    query = (_run_query().where(of_schedule, unstarted)
             .order_by(runs.c.priority.desc(), runs.c.scheduled_for, runs.c.id))
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


def unstarted_past(conn: Connection, schedule_id: int, started_by: datetime) -> list[Run]:
    """Scheduled runs of a schedule, never started and not held elsewhere, whose slot is before ``started_by``."""
    query = _run_query().where(runs.c.schedule_id == schedule_id,
                               runs.c.trigger_type == RunTrigger.SCHEDULED.value,
                               runs.c.status.in_([RunStatus.PENDING.value, RunStatus.QUEUED.value]),
                               runs.c.started_at.is_(None), runs.c.scheduled_for < started_by)
    return [rows.run_from_row(row) for row in conn.execute(query.order_by(runs.c.scheduled_for)).mappings()]


def set_status(conn: Connection, run_id: int, target: RunStatus, **values: Any) -> None:
    """Move a run to ``target`` under the transition table's guard; raises InvalidTransition."""
    _guarded_status(conn, run_id, target, **values)


def request_cancel(conn: Connection, run_id: int) -> None:
    """Ask the worker of a RUNNING run to cancel it at its next step boundary."""
    conn.execute(update(runs).where(runs.c.id == run_id, runs.c.status == RunStatus.RUNNING.value)
                 .values(cancel_requested=True))


def expired_leases(conn: Connection, now: datetime) -> list[Run]:
    """RUNNING runs whose lease ended before ``now`` (the reconciler's to recover)."""
    query = _run_query().where(runs.c.status == RunStatus.RUNNING.value, runs.c.lease_until < now)
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


def running_runs(conn: Connection, *, owner: str | None = None) -> list[Run]:
    """RUNNING runs, of one lease owner if given."""
    query = _run_query().where(runs.c.status == RunStatus.RUNNING.value)
    if owner is not None:
        query = query.where(runs.c.lease_owner == owner)
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


def orphaned_pending(conn: Connection) -> list[int]:
    """Schedules with a PENDING run and no scheduled run in flight (the §3.4 safety net)."""
    busy = runs.alias("busy")
    query = (select(runs.c.schedule_id).distinct().where(
        runs.c.status == RunStatus.PENDING.value,
        ~exists().where(busy.c.schedule_id == runs.c.schedule_id,
                        busy.c.trigger_type == RunTrigger.SCHEDULED.value,
                        busy.c.status.in_([s.value for s in BUSY_STATUSES]))))
    return [int(s) for s in conn.execute(query).scalars() if s is not None]


def next_due_at(conn: Connection, *, after: datetime | None = None) -> datetime | None:
    """The earliest ``not_before`` among waiting runs (later than ``after``): the serve loop's wake-up."""
    query = select(func.min(runs.c.not_before)).where(
        runs.c.status.in_([s.value for s in CLAIMABLE_STATUSES]))
    if after is not None:
        query = query.where(runs.c.not_before > after)
    return conn.execute(query).scalar()


def period_states(conn: Connection, schedule_id: int, business_keys: Sequence[str]) -> dict[str, PeriodState]:
    """Each period's latest revision among the schedule's own runs (not child runs)."""
    if not business_keys:
        return {}
    query = (select(runs.c.business_key, runs.c.status, runs.c.reason, runs.c.attempt_count, runs.c.scheduled_for,
                    runs.c.pinned)
             .where(runs.c.schedule_id == schedule_id, runs.c.parent_id.is_(None),
                    runs.c.business_key.in_(list(business_keys)))
             .order_by(runs.c.business_key, runs.c.revision, runs.c.id))
    out: dict[str, PeriodState] = {}
    for key, status, reason, tried, slot, pinned in conn.execute(query):  # a key's last row: its latest revision
        window_end = (pinned or {}).get("window_end")
        out[key] = PeriodState(RunStatus(status), reason, tried > 0, slot,
                               inputs.instant(window_end) if isinstance(window_end, str) else None)
    return out


@dataclass(frozen=True)
class PeriodState:
    """A period's latest run as a report reaching back reads it: status, whether it began, its slot and window end."""

    status: RunStatus
    reason: str | None
    began: bool
    slot: datetime
    window_end: datetime | None
