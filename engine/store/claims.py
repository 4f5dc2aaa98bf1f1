"""The worker's hot path: claiming a run and recording step boundaries.

Every statement here is built once, with bind parameters, and run through
``engine.store.fastsql`` (compiled once per dialect, below SQLAlchemy's per-call
pipeline), so a step boundary costs little more than its commit (SPEC §11). Every write is guarded by the claim's fencing token and
the RUNNING status; a guard that matches no row raises ``LeaseLost`` so the
caller's transaction rolls back and nothing is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Select,
    Update,
    bindparam,
    case,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from engine.core import concurrency_caps, errors, transitions
from engine.core.models import (
    ACTIVE_STATUSES,
    PRIORITY,
    AttemptOutcome,
    AttemptTrigger,
    Run,
    RunStatus,
    StepRecord,
    StepStatus,
)
from engine.plugins.contract import ArtifactRef
from engine.store import locks, rows, tables
from engine.store.fastsql import execute as fast
from engine.store.fastsql import execute_many as fast_many
from engine.store.run_rows import dialect_insert, family_schedule_disabled
from engine.store.tables import CLAIMABLE_RUN, artifacts, attempts, runs, steps
from engine.store.types import UTCDateTime

BACKFILL_PRIORITY = PRIORITY[AttemptTrigger.BACKFILL]
RUNNING = RunStatus.RUNNING.value
P = bindparam


def _now(name: str = "b_now") -> Any:
    return P(name, type_=UTCDateTime)


def _one_of(column: Any, values: tuple[str, ...]) -> Any:
    """``column IN ('a', 'b')`` with the values as SQL string constants (at least one)."""
    assert values, "a worker with no workflow or no project claims nothing and sends no query"
    return column.in_([literal_column(tables.sql_string(v)) for v in values])


@lru_cache(maxsize=16)
def _candidate(dialect: str, workflows: tuple[str, ...], projects: tuple[str, ...] | None,
               caps: concurrency_caps.Caps = concurrency_caps.Caps()) -> Any:
    """The claim's query for one worker's workflows and projects (fixed for its life, so built once).

    The lists are written into the SQL as constants: an expanding ``IN`` parameter is rendered
    again on every call, and a parameter per entry processed on every call (a worker serving
    100 projects spent more on either than SQLite on the query). The claimable statuses are spelled as the partial
    index ``ix_runs_claim_order`` spells them, so the query walks that index in its ORDER BY and
    stops at the first run that qualifies, whatever the length of the queue.
    """
    other = runs.alias("other")
    running_backfills = (select(func.count()).select_from(other)
                         .where(other.c.status == RUNNING, other.c.priority == BACKFILL_PRIORITY)
                         .scalar_subquery())
    query = select(runs).where(
        text(f"runs.{CLAIMABLE_RUN}"),
        or_(runs.c.not_before.is_(None), runs.c.not_before <= _now()),
        _one_of(runs.c.workflow, workflows),
        ~exists().where(other.c.base_key == runs.c.base_key, other.c.status == RUNNING),
        or_(runs.c.priority != BACKFILL_PRIORITY, running_backfills < P("b_limit")),
        # A disabled schedule holds its runs and its families' children (SPEC §15.3; ``Run.held`` reads
        # the same rule through ``family_schedule_enabled``).
        ~family_schedule_disabled(),
    ).order_by(runs.c.schedule_priority.desc(), runs.c.priority.desc(), runs.c.scheduled_for, runs.c.id).limit(1)
    if projects is not None:
        query = query.where(_one_of(runs.c.project, projects))
    # The caps (SPEC §18): counts of RUNNING runs, exact because claims are serialised (``acquire_run``).
    if caps.max_running is not None:
        running = select(func.count()).select_from(other).where(other.c.status == RUNNING).scalar_subquery()
        query = query.where(running < literal_column(str(int(caps.max_running))))
    for workflow, cap in caps.workflows:
        if workflow in workflows:
            name: Any = literal_column(tables.sql_string(workflow))
            running_of = (select(func.count()).select_from(other).where(other.c.status == RUNNING,
                                                                       other.c.workflow == name).scalar_subquery())
            query = query.where(or_(runs.c.workflow != name, running_of < literal_column(str(int(cap)))))
    if dialect == "postgresql":
        return query.with_for_update(skip_locked=True, of=runs)
    if dialect == "sqlite":
        # Without statistics SQLite's planner prefers the ``status`` index and sorts the whole
        # queue (0.7 ms a claim with 864 runs queued, growing with the queue); INDEXED BY pins the
        # walk. SQLAlchemy renders no FROM hint for SQLite, hence the textual statement.
        return _sqlite_indexed_by(query, "ix_runs_claim_order")
    return query


def _sqlite_indexed_by(query: Select[Any], index: str) -> Any:
    """``query`` as SQLite text with ``INDEXED BY index`` on its outer ``runs``, result types kept."""
    from sqlalchemy.dialects import sqlite

    compiled = query.compile(dialect=sqlite.dialect(paramstyle="named"))
    sql = str(compiled)
    outer = f"FROM {runs.name} \n"
    assert sql.count(outer) == 1, sql  # the outer FROM; the subqueries read ``runs AS other``
    sql = sql.replace(outer, f"FROM {runs.name} INDEXED BY {index} \n")
    named = {name: b for b, name in compiled.bind_names.items()}  # as rendered in ``sql``
    binds = [bindparam(name, type_=b.type) if b.required else bindparam(name, b.effective_value, type_=b.type)
             for name, b in named.items()]
    return text(sql).bindparams(*binds).columns(*query.selected_columns)


_CLAIM = update(runs).where(runs.c.id == P("b_id")).values(
    status=RUNNING, lease_owner=P("b_owner"), lease_until=_now("b_lease"), fence=P("b_fence"),
    claimed_at=_now(), started_at=func.coalesce(runs.c.started_at, _now()), attempt_count=P("b_attempt"),
    not_before=None, next_attempt_trigger=None, completed_at=None)
_NEW_STEPS = insert(steps)


@lru_cache(maxsize=2)
def _open_attempt(dialect: str) -> Any:
    """Insert the claim's attempt, or continue the pending one the reconciler wrote (SPEC §5).

    Only a ``pending`` row is taken over; the trigger it was written with stays.
    """
    stmt: Any
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert  # loaded already by a PostgreSQL engine

        stmt = pg_insert(attempts)
    else:
        stmt = sqlite_insert(attempts)
    taken = {name: stmt.excluded[name] for name in ("from_step", "outcome", "worker_id", "fence", "started_at")}
    return stmt.on_conflict_do_update(index_elements=[attempts.c.run_id, attempts.c.number], set_=taken,
                                      where=attempts.c.outcome == AttemptOutcome.PENDING.value)

_STEPS_OF = select(steps).where(steps.c.run_id == P("b_run")).order_by(steps.c.position)
_START_STEP = update(steps).where(steps.c.run_id == P("b_run"), steps.c.position == P("b_pos")).values(
    status=RUNNING, started_at=_now(), finished_at=None, error_code=None, error_message=None,
    attempts=steps.c.attempts + 1)
_GUARD = (runs.c.id == P("b_id"), runs.c.fence == P("b_fence"), runs.c.status == RUNNING)
_HOLD = update(runs).where(*_GUARD).values(lease_until=_now("b_lease")).returning(runs.c.cancel_requested)
_HOLD_PINNED = (update(runs).where(*_GUARD).values(lease_until=_now("b_lease"), pinned=P("b_pinned"))
                .returning(runs.c.cancel_requested))
_CHECK = select(runs.c.id).where(*_GUARD, runs.c.lease_until > P("b_now"))
_STEP_WHERE = (steps.c.run_id == P("b_run"), steps.c.position == P("b_pos"))
_STEP_END = update(steps).where(*_STEP_WHERE).values(
    status=P("b_status"), finished_at=_now(), error_code=P("b_code"), error_message=P("b_message"),
    output=P("b_output"))
_STEP_FAILED = update(steps).where(*_STEP_WHERE).values(
    status=P("b_status"), finished_at=_now(), error_code=P("b_code"), error_message=P("b_message"))


@dataclass(frozen=True)
class Claim:
    run: Run
    fence: int
    attempt: int
    start_position: int


def acquire_run(conn: Connection, *, worker_id: str, now: datetime, lease_until: datetime,
                steps_by_workflow: Mapping[str, Sequence[str]], projects: Sequence[str] | None,
                backfill_limit: int, caps: concurrency_caps.Caps = concurrency_caps.Caps(),
                skip: Callable[[Connection, Run], bool] | None = None) -> Claim | None:
    """Claim the highest-priority, oldest claimable run, or return None.

    Claimable: QUEUED, or RETRY_PENDING, with ``not_before`` passed; of a
    workflow this worker knows and a project it serves; no other revision of
    its period RUNNING; backfill-priority runs only while fewer than
    ``backfill_limit`` are RUNNING; fewer RUNNING than ``caps`` allow, in all and
    of its workflow. The limits are exact because claims are
    serialised: ``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL.
    The claim also starts the first step that is not done (one commit). ``skip(conn, run)`` sees each
    candidate first: when it ended the run itself (a scheduled run past its ``start_by``, recorded MISSED
    in this transaction: ``start_by.miss_if_late``), the next candidate is taken.
    """
    locks.serialise_with_claims(conn)
    if not steps_by_workflow or (projects is not None and not projects):
        return None  # a node that serves no project (SPEC §13) claims nothing
    query = _candidate(conn.dialect.name, tuple(steps_by_workflow), tuple(projects) if projects is not None else None,
                       caps)
    while True:
        row = conn.execute(query, {"b_now": now, "b_limit": backfill_limit}).mappings().first()
        if row is None:
            return None
        run = rows.run_from_row(row)
        if skip is None or not skip(conn, run):
            break
    fence, attempt = run.fence + 1, run.attempt_count + 1
    trigger = run.next_attempt_trigger or AttemptTrigger(run.trigger.value.lower())
    fast(conn, _CLAIM, {"b_id": run.id, "b_owner": worker_id, "b_lease": lease_until, "b_fence": fence,
                          "b_now": now, "b_attempt": attempt})
    names = list(steps_by_workflow[run.workflow])
    # Step rows are made by a run's first claim, so a run never claimed has none to read.
    stored = [] if run.attempt_count == 0 else [
        rows.step_from_row(r) for r in conn.execute(_STEPS_OF, {"b_run": run.id}).mappings()]
    if not stored:
        fast_many(conn, _NEW_STEPS, [dict(run_id=run.id, position=i, name=n, status=StepStatus.PENDING.value,
                                          attempts=0) for i, n in enumerate(names)])
        stored = [StepRecord(run.id, i, n, StepStatus.PENDING, 0, None, None, None, None, None)
                  for i, n in enumerate(names)]
    if [s.name for s in stored] == names:
        start = next((s.position for s in stored if s.status not in (StepStatus.SUCCESS, StepStatus.SKIPPED)),
                     len(stored))
    else:
        start = len(stored)  # recorded under another version of the workflow: the worker fails the run
    if start < len(stored):
        fast(conn, _START_STEP, {"b_run": run.id, "b_pos": start, "b_now": now})
        stored[start] = dataclasses.replace(stored[start], status=StepStatus.RUNNING, started_at=now,
                                            attempts=stored[start].attempts + 1)
    fast(conn, _open_attempt(conn.dialect.name), dict(
        run_id=run.id, number=attempt, trigger=trigger.value,
        from_step=stored[start].name if start < len(stored) else None, outcome=AttemptOutcome.RUNNING.value,
        worker_id=worker_id, fence=fence, started_at=now))
    claimed = dataclasses.replace(run, status=RunStatus.RUNNING, lease_owner=worker_id, lease_until=lease_until,
                                  fence=fence, attempt_count=attempt, claimed_at=now,
                                  started_at=run.started_at or now, steps=tuple(stored))
    return Claim(run=claimed, fence=fence, attempt=attempt, start_position=start)


def start_step(conn: Connection, run_id: int, position: int, now: datetime) -> None:
    """Start step ``position`` of the run (its execution counted), after a boundary ``advance_step`` cannot make."""
    fast(conn, _START_STEP, {"b_run": run_id, "b_pos": position, "b_now": now})


def check_fence(conn: Connection, run_id: int, fence: int, now: datetime) -> None:
    """Raise LeaseLost unless ``fence`` still owns the RUNNING run under a lease that has not run out at ``now``.

    An expired lease counts as lost even while no reconciler has taken the run
    yet (heartbeats that could not reach the database): one may at any moment.
    """
    if fast(conn, _CHECK, {"b_id": run_id, "b_fence": fence, "b_now": now}).fetchone() is None:
        raise errors.LeaseLost(run_id, fence)


def hold_run(conn: Connection, run_id: int, fence: int, *, lease_until: datetime,
             pinned: Mapping[str, Any] | None = None) -> bool:
    """Extend the lease (and update pins) under the token; returns whether a cancel was requested."""
    params: dict[str, Any] = {"b_id": run_id, "b_fence": fence, "b_lease": lease_until}
    if pinned is not None:
        params["b_pinned"] = dict(pinned)
    found = fast(conn, _HOLD if pinned is None else _HOLD_PINNED, params).fetchall()
    if not found:
        raise errors.LeaseLost(run_id, fence)
    return bool(found[0][0])


def record_step_end(conn: Connection, run_id: int, position: int, *, status: StepStatus, now: datetime,
                    output: Mapping[str, Any] | None = None, error_code: str | None = None,
                    error_message: str | None = None) -> None:
    """A step's outcome; a failure keeps the output an earlier execution recorded."""
    params: dict[str, Any] = {"b_run": run_id, "b_pos": position, "b_status": status.value, "b_now": now,
                              "b_code": error_code, "b_message": error_message}
    if output is None:
        fast(conn, _STEP_FAILED, params)
    else:
        fast(conn, _STEP_END, {**params, "b_output": dict(output)})


_IS_DONE = steps.c.position == P("b_pos")
_NEXT_STEP = update(steps).where(steps.c.run_id == P("b_run"), steps.c.position.in_([P("b_pos"), P("b_next")])).values(
    status=case((_IS_DONE, P("b_status")), else_=RUNNING),
    output=case((_IS_DONE, P("b_output", type_=steps.c.output.type)), else_=steps.c.output),
    started_at=case((_IS_DONE, steps.c.started_at), else_=_now()),
    finished_at=case((_IS_DONE, _now()), else_=None),
    error_code=None, error_message=None,
    attempts=case((_IS_DONE, steps.c.attempts), else_=steps.c.attempts + 1))


def advance_step(conn: Connection, run_id: int, position: int, *, status: StepStatus, output: Mapping[str, Any],
                 now: datetime) -> None:
    """One statement for a step boundary: step ``position`` ends with ``output``, the next one starts."""
    fast(conn, _NEXT_STEP, {"b_run": run_id, "b_pos": position, "b_next": position + 1, "b_status": status.value,
                              "b_output": dict(output), "b_now": now})


@lru_cache(maxsize=8)
def _release(fenced: bool, expiring: bool) -> Update:
    conditions = [runs.c.id == P("b_id"), runs.c.status == P("b_expect")]
    if fenced:
        conditions.append(runs.c.fence == P("b_fence"))
    if expiring:
        conditions.append(runs.c.lease_until < _now("b_expired_by"))
    return update(runs).where(*conditions).values(
        status=P("b_status"), lease_owner=None, lease_until=None, not_before=_now("b_not_before"),
        error_code=P("b_code"), error_message=P("b_message"), next_attempt_trigger=P("b_trigger"),
        completed_at=_now("b_completed"))


def release_run(conn: Connection, run_id: int, fence: int | None, target: RunStatus, now: datetime, *,
                not_before: datetime | None = None, error_code: str | None = None,
                error_message: str | None = None, next_attempt_trigger: AttemptTrigger | None = None,
                expect_status: RunStatus = RunStatus.RUNNING, lease_expired_by: datetime | None = None) -> None:
    """Move a RUNNING run to its outcome and drop the lease.

    ``fence`` None skips the token check (the reconciler, which guards on the
    lease having expired by ``lease_expired_by`` instead).
    """
    transitions.transition(expect_status, target)
    params: dict[str, Any] = {
        "b_id": run_id, "b_expect": expect_status.value, "b_fence": fence, "b_expired_by": lease_expired_by,
        "b_status": target.value, "b_not_before": not_before, "b_code": error_code, "b_message": error_message,
        "b_trigger": next_attempt_trigger.value if next_attempt_trigger else None,
        "b_completed": None if target in ACTIVE_STATUSES else now}
    if fast(conn, _release(fence is not None, lease_expired_by is not None), params).rowcount != 1:
        raise errors.LeaseLost(run_id, fence or 0)


def record_artifacts(conn: Connection, run_id: int, step: str, refs: Sequence[ArtifactRef], now: datetime) -> None:
    """Record a step's artifacts (one row per kind and location)."""
    for ref in refs:
        stmt = dialect_insert(conn)(artifacts).values(run_id=run_id, kind=ref.kind, step=step, location=ref.location,
                                               sha256=ref.sha256, external_id=ref.external_id, created_at=now)
        stmt = stmt.on_conflict_do_update(index_elements=["run_id", "kind", "location"],
                                          set_={"sha256": ref.sha256, "external_id": ref.external_id})
        conn.execute(stmt)


def skip_steps_from(conn: Connection, run_id: int, position: int, reason: str, now: datetime) -> None:
    """Mark the steps from ``position`` on SKIPPED with ``reason``."""
    conn.execute(update(steps).where(steps.c.run_id == run_id, steps.c.position >= position).values(
        status=StepStatus.SKIPPED.value, finished_at=now, error_code=None, error_message=reason))
