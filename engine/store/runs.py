"""Run rows: creation, claiming, step checkpoints, outcomes, requeues.

Every worker write is guarded by the run's fencing token and its status, in
SQL; a guard that matches no row raises ``LeaseLost`` or ``InvalidTransition``
so the caller's transaction rolls back and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, func, insert, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from engine import errors, transitions
from engine.models import (
    ACTIVE_STATUSES, PRIORITY, AttemptOutcome, AttemptTrigger, Run, RunStatus, RunTrigger, StepStatus,
)
from engine.store import rows
from engine.store.tables import artifacts, attempts, runs, schedules, steps
from engine.workflow import ArtifactRef

CLAIM_LOCK_KEY = 7312002
BACKFILL_PRIORITY = PRIORITY[AttemptTrigger.BACKFILL]
_ACTIVE = [s.value for s in ACTIVE_STATUSES]


def _insert(conn: Connection) -> Any:
    return pg_insert if conn.dialect.name == "postgresql" else sqlite_insert


def _insert_or_nothing(conn: Connection) -> Any:
    # Built once per dialect and executed with parameters, so SQLAlchemy's statement cache applies.
    return _insert(conn)(runs).on_conflict_do_nothing().returning(runs.c.id, runs.c.idempotency_key,
                                                                  sort_by_parameter_order=True)


def insert_run(conn: Connection, values: Mapping[str, Any]) -> int | None:
    """Insert a run unless its slot or idempotency key already has one (``ON CONFLICT DO NOTHING``).

    Returns the new id, or None when another row already handles that period.
    """
    row = conn.execute(_insert_or_nothing(conn), dict(values)).first()
    return None if row is None else int(row[0])


def insert_runs(conn: Connection, rows_: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Insert many runs in one statement, each doing nothing on conflict; returns {key: id} of those inserted."""
    if not rows_:
        return {}
    result = conn.execute(_insert_or_nothing(conn), [dict(r) for r in rows_])
    return {key: int(run_id) for run_id, key in result.all()}


def overlap_counts(conn: Connection, schedule_id: int) -> tuple[int, int]:
    """(active, pending) SCHEDULED runs of a schedule: what overlap policies count."""
    query = (select(runs.c.status, func.count())
             .where(runs.c.schedule_id == schedule_id, runs.c.trigger_type == RunTrigger.SCHEDULED.value,
                    runs.c.status.in_(_ACTIVE))
             .group_by(runs.c.status))
    counts: dict[str, int] = {status: count for status, count in conn.execute(query).all()}
    return sum(counts.values()), counts.get(RunStatus.PENDING.value, 0)


def lock_schedule(conn: Connection, schedule_id: int) -> None:
    """Serialise with the tick on PostgreSQL (SQLite transactions are already serial)."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(schedules.c.id).where(schedules.c.id == schedule_id).with_for_update())


def promote_pending(conn: Connection, schedule_id: int | None, now: datetime) -> int | None:
    """Queue the oldest PENDING run of a schedule when no other scheduled run of it is in flight."""
    if schedule_id is None:
        return None
    lock_schedule(conn, schedule_id)
    busy = conn.execute(select(func.count()).where(
        runs.c.schedule_id == schedule_id, runs.c.trigger_type == RunTrigger.SCHEDULED.value,
        runs.c.status.in_([RunStatus.QUEUED.value, RunStatus.RUNNING.value, RunStatus.RETRY_PENDING.value]),
    )).scalar_one()
    if busy:
        return None
    oldest = conn.execute(select(runs.c.id).where(runs.c.schedule_id == schedule_id,
                                                  runs.c.status == RunStatus.PENDING.value)
                          .order_by(runs.c.scheduled_for, runs.c.id).limit(1)).scalar()
    if oldest is None:
        return None
    _guarded_status(conn, oldest, RunStatus.QUEUED)
    return int(oldest)


def _guarded_status(conn: Connection, run_id: int, target: RunStatus, **values: Any) -> None:
    allowed = [s.value for s in transitions.sources(target)]
    result = conn.execute(update(runs).where(runs.c.id == run_id, runs.c.status.in_(allowed))
                          .values(status=target.value, **values))
    if result.rowcount != 1:
        current = conn.execute(select(runs.c.status).where(runs.c.id == run_id)).scalar()
        if current is None:
            raise errors.NotFound(f"no run {run_id}")
        raise errors.InvalidTransition(f"run {run_id}", current, target.value)


# --- reading ---------------------------------------------------------------

def _run_query() -> Any:
    return select(runs, schedules.c.name.label("schedule_name")).select_from(
        runs.outerjoin(schedules, runs.c.schedule_id == schedules.c.id))


def get_run(conn: Connection, run_id: int, *, detail: bool = True) -> Run:
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
    base = f"{workflow}:{project}:{business_key}"
    query = _run_query().where(runs.c.base_key == base).order_by(runs.c.revision)
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


def existing_keys(conn: Connection, base_keys: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(base_keys), 500):
        chunk = base_keys[start:start + 500]
        found.update(conn.execute(select(runs.c.base_key).where(runs.c.base_key.in_(chunk))).scalars())
    return found


def list_runs(conn: Connection, *, statuses: Iterable[str] = (), schedule_id: int | None = None,
              limit: int | None = 200) -> list[Run]:
    query = _run_query().order_by(runs.c.scheduled_for.desc(), runs.c.id.desc())
    status_list = list(statuses)
    if status_list:
        query = query.where(runs.c.status.in_(status_list))
    if schedule_id is not None:
        query = query.where(runs.c.schedule_id == schedule_id)
    if limit:
        query = query.limit(limit)
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


# --- claiming ----------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    run: Run
    fence: int
    attempt: int
    start_position: int


def acquire_run(conn: Connection, *, worker_id: str, now: datetime, lease_until: datetime,
                steps_by_workflow: Mapping[str, Sequence[str]], projects: Sequence[str] | None,
                backfill_limit: int) -> Claim | None:
    """Claim the highest-priority, oldest claimable run, or return None.

    Claimable: QUEUED, or RETRY_PENDING, with ``not_before`` passed; of a
    workflow this worker knows and a project it serves; no other revision of
    its period RUNNING; backfill-priority runs only while fewer than
    ``backfill_limit`` are RUNNING. The limits are exact because claims are
    serialised: ``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL.
    """
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": CLAIM_LOCK_KEY})
    other = runs.alias("other")
    running_backfills = (select(func.count()).select_from(other)
                         .where(other.c.status == RunStatus.RUNNING.value, other.c.priority == BACKFILL_PRIORITY)
                         .scalar_subquery())
    query = (select(runs).where(
        runs.c.status.in_([RunStatus.QUEUED.value, RunStatus.RETRY_PENDING.value]),
        or_(runs.c.not_before.is_(None), runs.c.not_before <= now),
        runs.c.workflow.in_(list(steps_by_workflow)),
        ~exists().where(other.c.base_key == runs.c.base_key, other.c.status == RunStatus.RUNNING.value),
        or_(runs.c.priority != BACKFILL_PRIORITY, running_backfills < backfill_limit),
    ).order_by(runs.c.priority.desc(), runs.c.scheduled_for, runs.c.id).limit(1))
    if projects is not None:
        query = query.where(runs.c.project.in_(list(projects)))
    if postgres:
        query = query.with_for_update(skip_locked=True, of=runs)
    row = conn.execute(query).mappings().first()
    if row is None:
        return None
    run = rows.run_from_row(row)
    fence = run.fence + 1
    attempt_number = run.attempt_count + 1
    trigger = run.next_attempt_trigger or AttemptTrigger(run.trigger.value.lower())
    conn.execute(update(runs).where(runs.c.id == run.id).values(
        status=RunStatus.RUNNING.value, lease_owner=worker_id, lease_until=lease_until, fence=fence,
        claimed_at=now, started_at=func.coalesce(runs.c.started_at, now), attempt_count=attempt_number,
        not_before=None, next_attempt_trigger=None, resume_step=None, completed_at=None))

    names = list(steps_by_workflow[run.workflow])
    stored = conn.execute(select(steps.c.position, steps.c.name, steps.c.status)
                          .where(steps.c.run_id == run.id).order_by(steps.c.position)).all()
    if not stored:
        conn.execute(insert(steps), [dict(run_id=run.id, position=i, name=n, status=StepStatus.PENDING.value,
                                          attempts=0) for i, n in enumerate(names)])
        statuses = [StepStatus.PENDING.value] * len(names)
    else:
        if [s.name for s in stored] != names:
            # Recorded under another version of the workflow: the worker fails the run, no step starts.
            names, statuses = [s.name for s in stored], [StepStatus.SUCCESS.value] * len(stored)
        else:
            statuses = [s.status for s in stored]
    start = next((i for i, status in enumerate(statuses)
                  if status not in (StepStatus.SUCCESS.value, StepStatus.SKIPPED.value)), len(names))
    if start < len(names):
        conn.execute(update(steps).where(steps.c.run_id == run.id, steps.c.position == start).values(
            status=StepStatus.RUNNING.value, started_at=now, finished_at=None, attempts=steps.c.attempts + 1))
    conn.execute(insert(attempts).values(
        run_id=run.id, number=attempt_number, trigger=trigger.value,
        from_step=names[start] if start < len(names) else None, outcome=AttemptOutcome.RUNNING.value,
        worker_id=worker_id, fence=fence, started_at=now))
    claimed = get_run(conn, run.id)
    return Claim(run=claimed, fence=fence, attempt=attempt_number, start_position=start)


# --- worker writes, each guarded by the fencing token -------------------------------------------

def _hold(conn: Connection, run_id: int, fence: int, **values: Any) -> bool:
    """Check (and optionally update) the run under this worker's token; return cancel_requested."""
    stmt = (update(runs).where(runs.c.id == run_id, runs.c.fence == fence,
                               runs.c.status == RunStatus.RUNNING.value)
            .values(**(values or {"fence": fence})).returning(runs.c.cancel_requested))
    row = conn.execute(stmt).first()
    if row is None:
        raise errors.LeaseLost(run_id, fence)
    return bool(row[0])


def check_fence(conn: Connection, run_id: int, fence: int) -> None:
    found = conn.execute(select(runs.c.id).where(runs.c.id == run_id, runs.c.fence == fence,
                                                 runs.c.status == RunStatus.RUNNING.value)).first()
    if found is None:
        raise errors.LeaseLost(run_id, fence)


def extend_lease(conn: Connection, run_id: int, fence: int, lease_until: datetime) -> None:
    _hold(conn, run_id, fence, lease_until=lease_until)


def record_artifacts(conn: Connection, run_id: int, step: str, refs: Sequence[ArtifactRef], now: datetime) -> None:
    for ref in refs:
        stmt = _insert(conn)(artifacts).values(run_id=run_id, kind=ref.kind, step=step, location=ref.location,
                                               sha256=ref.sha256, external_id=ref.external_id, created_at=now)
        stmt = stmt.on_conflict_do_update(index_elements=["run_id", "kind", "location"],
                                          set_={"sha256": ref.sha256, "external_id": ref.external_id})
        conn.execute(stmt)


def record_step_end(conn: Connection, run_id: int, position: int, *, status: StepStatus, now: datetime,
                    output: Mapping[str, Any] | None = None, error_code: str | None = None,
                    error_message: str | None = None) -> None:
    values: dict[str, Any] = dict(status=status.value, finished_at=now, error_code=error_code,
                                  error_message=error_message)
    if output is not None:
        values["output"] = dict(output)
    conn.execute(update(steps).where(steps.c.run_id == run_id, steps.c.position == position).values(**values))


def start_step(conn: Connection, run_id: int, position: int, now: datetime) -> None:
    conn.execute(update(steps).where(steps.c.run_id == run_id, steps.c.position == position).values(
        status=StepStatus.RUNNING.value, started_at=now, finished_at=None, error_code=None, error_message=None,
        attempts=steps.c.attempts + 1))


def skip_steps_from(conn: Connection, run_id: int, position: int, reason: str, now: datetime) -> None:
    conn.execute(update(steps).where(steps.c.run_id == run_id, steps.c.position >= position).values(
        status=StepStatus.SKIPPED.value, finished_at=now, error_code=None, error_message=reason))


def hold_run(conn: Connection, run_id: int, fence: int, *, lease_until: datetime,
             pinned: Mapping[str, Any] | None = None) -> bool:
    """Extend the lease (and update pins) under the token; returns whether a cancel was requested."""
    values: dict[str, Any] = {"lease_until": lease_until}
    if pinned is not None:
        values["pinned"] = dict(pinned)
    return _hold(conn, run_id, fence, **values)


def finish_attempt(conn: Connection, run_id: int, number: int, outcome: AttemptOutcome, now: datetime,
                   error_code: str | None = None, error_message: str | None = None) -> None:
    conn.execute(update(attempts).where(attempts.c.run_id == run_id, attempts.c.number == number).values(
        outcome=outcome.value, finished_at=now, error_code=error_code, error_message=error_message))


def release_run(conn: Connection, run_id: int, fence: int | None, target: RunStatus, now: datetime, *,
                not_before: datetime | None = None, error_code: str | None = None,
                error_message: str | None = None, next_attempt_trigger: AttemptTrigger | None = None,
                expect_status: RunStatus = RunStatus.RUNNING, lease_expired_by: datetime | None = None) -> None:
    """Move a RUNNING run to its outcome and drop the lease; ``fence`` None skips the token check
    (the reconciler, which guards on the expired lease instead)."""
    transitions.transition(expect_status, target)
    terminal = target not in ACTIVE_STATUSES
    conditions = [runs.c.id == run_id, runs.c.status == expect_status.value]
    if fence is not None:
        conditions.append(runs.c.fence == fence)
    if lease_expired_by is not None:
        conditions.append(runs.c.lease_until < lease_expired_by)
    result = conn.execute(update(runs).where(and_(*conditions)).values(
        status=target.value, lease_owner=None, lease_until=None, not_before=not_before,
        error_code=error_code, error_message=error_message,
        next_attempt_trigger=next_attempt_trigger.value if next_attempt_trigger else None,
        completed_at=now if terminal else None))
    if result.rowcount != 1:
        raise errors.LeaseLost(run_id, fence or 0)


def add_attempt_budget(conn: Connection, run_id: int, extra: int) -> None:
    conn.execute(update(runs).where(runs.c.id == run_id).values(max_attempts=runs.c.max_attempts + extra))


def schedule_of(conn: Connection, run_id: int) -> int | None:
    return conn.execute(select(runs.c.schedule_id).where(runs.c.id == run_id)).scalar()


# --- operator actions --------------------------------------------------------

def requeue(conn: Connection, run: Run, *, trigger: AttemptTrigger, now: datetime,
            from_step: str | None = None, step_names: Sequence[str] = (), fresh_budget: int | None = None) -> None:
    """Queue ``run`` again as a new attempt (retry, backfill, trigger, approve).

    ``from_step`` resets that step and the later ones to PENDING so they execute
    again; earlier SUCCESS steps keep their outputs. ``fresh_budget`` gives the
    run that many more attempts (a manual retry starts a fresh budget).
    """
    values: dict[str, Any] = dict(priority=PRIORITY[trigger], next_attempt_trigger=trigger.value,
                                  not_before=None, completed_at=None, cancel_requested=False,
                                  resume_step=from_step, reason=None)
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


def set_status(conn: Connection, run_id: int, target: RunStatus, **values: Any) -> None:
    _guarded_status(conn, run_id, target, **values)


def request_cancel(conn: Connection, run_id: int) -> None:
    conn.execute(update(runs).where(runs.c.id == run_id, runs.c.status == RunStatus.RUNNING.value)
                 .values(cancel_requested=True))


def expired_leases(conn: Connection, now: datetime) -> list[Run]:
    query = _run_query().where(runs.c.status == RunStatus.RUNNING.value, runs.c.lease_until < now)
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]


def running_runs(conn: Connection, *, owner: str | None = None) -> list[Run]:
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
                        busy.c.status.in_([RunStatus.QUEUED.value, RunStatus.RUNNING.value,
                                           RunStatus.RETRY_PENDING.value]))))
    return [int(s) for s in conn.execute(query).scalars() if s is not None]


def next_due_at(conn: Connection) -> datetime | None:
    """The earliest ``not_before`` among waiting runs (for the serve loop's sleep)."""
    return conn.execute(select(func.min(runs.c.not_before)).where(
        runs.c.status.in_([RunStatus.RETRY_PENDING.value, RunStatus.QUEUED.value]))).scalar()
