"""The SQL of ``reportflow metrics`` (SPEC §9, §15.8): every value an exposition reads, in one transaction.

Values are aggregated in SQL (GROUP BY, and SUM over CASE for histogram buckets), so
the cost grows with the number of schedules and label combinations, never with the
number of runs loaded into Python; the few row lists read here are bounded by the
work in flight (RUNNING runs, active scheduled runs). A child run has no schedule of
its own: it counts under its parent's (SPEC §17), except where the family is one run
(runs created, runs in progress).

- Gauges describe rows whose status can change: runs per (schedule, trigger, status),
  how long the oldest waiting run has waited (MANUAL_REQUIRED included: it waits for a
  person), stalled, held, in-progress and late runs, undelivered alerts, next slot and
  last success, the last scheduler heartbeat.
- Counters come from append-only rows, so they never go down: finished attempts; the
  slot counts the scheduler's audit events carry; runs created, which are rows plus the
  runs a prune removed (its ``runs_pruned`` events keep their counts by trigger).
- Histograms per schedule: the duration of finished runs, and the start delay
  (``started_at - scheduled_for``) of every SCHEDULED run that has started, those still
  running included (a start never moves once made). Backfills start days after their
  slot by design and would drown the signal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, func, or_, select, type_coerce
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from engine.core import alerts, policies, retention, slo
from engine.core.models import (
    ACTIVE_STATUSES,
    HOLDABLE_STATUSES,
    TERMINAL_STATUSES,
    AttemptOutcome,
    RunStatus,
    RunTrigger,
)
from engine.store import instances, rows, tables
from engine.store.run_rows import family_schedule_disabled, family_schedule_id
from engine.store.tables import attempts, audit_events, events, runs, schedules
from engine.store.types import UTCDateTime

# 10 ms (a trivial step on a warm worker) to 1 h (a CPU-bound LLM generation), roughly ×2.5 apart.
BUCKETS_S: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                                120.0, 300.0, 600.0, 1800.0, 3600.0)
# Waiting for a worker, or for a person (MANUAL_REQUIRED): the oldest pending age covers both.
PENDING_STATUSES = (RunStatus.QUEUED, RunStatus.PENDING, RunStatus.RETRY_PENDING, RunStatus.MANUAL_REQUIRED)
FINISHED_STATUSES = tuple(sorted(s.value for s in TERMINAL_STATUSES))
IN_PROGRESS = (RunStatus.RUNNING, RunStatus.WAITING)
# The scheduler's audit events that count slots, by the reason a slot did not run.
NOT_RUN_ACTIONS = {"slots_missed": "misfire", "slots_manual_required": "manual_required",
                   "slots_too_old": "too_old", "slots_disabled": "disabled",
                   "slots_holiday": "holiday", "slots_maintenance": "maintenance"}
# What "missed" counts (disabled, holiday and maintenance: on purpose).
MISSED_REASONS = ("misfire", "manual_required", "too_old")
OVERLAP_ACTIONS = ("slots_overlap_skipped",)


@dataclass(frozen=True)
class Histogram:
    """Cumulative counts aligned with ``BUCKETS_S`` (``+Inf`` is ``count``)."""

    cumulative: tuple[int, ...]
    count: int
    sum_s: float


@dataclass(frozen=True)
class Snapshot:
    """Every metric value at one instant; label tuples are in the metric's label order."""

    runs: dict[tuple[str, str, str], int]
    oldest_pending_age_s: float
    stalled_runs: int
    next_run_at: dict[str, datetime]
    last_success_at: dict[str, datetime]
    attempts: dict[tuple[str, str, str], int]
    missed_slots: dict[str, int]
    overlap_skips: dict[str, int]
    run_duration: dict[str, Histogram]
    start_delay: dict[str, Histogram]
    slots_not_run: dict[tuple[str, str], int] = field(default_factory=dict)
    runs_created: dict[tuple[str, str], int] = field(default_factory=dict)
    pending_age_s: dict[str, float] = field(default_factory=dict)
    in_progress: dict[str, int] = field(default_factory=dict)
    in_progress_age_s: dict[str, float] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)
    late: dict[str, int] = field(default_factory=dict)
    undelivered: dict[tuple[str, str], int] = field(default_factory=dict)
    scheduler_beat_at: datetime | None = None
    # Filled by the read side (they need cron or other stores): SPEC §15.2 and §15.8.
    slo: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    freshness_target: dict[str, float] = field(default_factory=dict)
    stuck: dict[str, int] = field(default_factory=dict)


def read_snapshot(conn: Connection, now: datetime) -> Snapshot:
    """Read every metric at ``now`` inside the caller's transaction (a consistent view)."""
    names: dict[int | None, str] = {None: ""}
    live: list[str] = []
    next_run_at: dict[str, datetime] = {}
    deadlines: dict[int, timedelta] = {}
    any_disabled = False
    for row in conn.execute(select(schedules.c.id, schedules.c.name, schedules.c.enabled, schedules.c.archived,
                                   schedules.c.next_run_at, schedules.c.definition)):
        names[row.id] = row.name
        any_disabled = any_disabled or not row.enabled
        if not row.archived:
            live.append(row.name)
            deadlines[row.id] = slo.deadline_of(rows.spec_from_definition(row.definition, row.enabled))
            if row.enabled and row.next_run_at is not None:
                next_run_at[row.name] = row.next_run_at
    not_run, skips = _slot_counts(conn, names)
    zeros = {name: 0 for name in live}
    missed: dict[str, int] = dict(zeros)
    for (name, reason), count in not_run.items():
        if reason in MISSED_REASONS:
            missed[name] = missed.get(name, 0) + count
    duration, delay = _histograms(conn, names, live)
    pending_age = _pending_ages(conn, names, now)
    in_progress, in_progress_age = _in_progress(conn, names, now)
    return Snapshot(
        runs=_run_counts(conn, names, live),
        oldest_pending_age_s=max(pending_age.values(), default=0.0),
        stalled_runs=_stalled(conn, now),
        next_run_at=next_run_at,
        last_success_at=_last_success(conn, names),
        attempts=_attempt_counts(conn, names),
        missed_slots=missed,
        overlap_skips=zeros | skips,
        run_duration=duration,
        start_delay=delay,
        slots_not_run={(name, reason): 0 for name in live for reason in MISSED_REASONS} | not_run,
        runs_created=_runs_created(conn, names, live),
        pending_age_s=dict.fromkeys(live, 0.0) | pending_age,
        in_progress=zeros | in_progress,
        in_progress_age_s=dict.fromkeys(live, 0.0) | in_progress_age,
        held=zeros | (_held(conn, names) if any_disabled else {}),  # none disabled: nothing held, no scan
        late=zeros | _late(conn, names, deadlines, now),
        undelivered=_undelivered(conn, live),
        scheduler_beat_at=_scheduler_beat(conn),
    )


_parent = runs.alias("parent")
# A child run has no schedule of its own: it counts under its parent's (SPEC §17).
_SCHEDULE_OF_RUN = func.coalesce(runs.c.schedule_id, _parent.c.schedule_id)
_WITH_PARENT = runs.outerjoin(_parent, runs.c.parent_id == _parent.c.id)


def _run_counts(conn: Connection, names: dict[int | None, str], live: Sequence[str]) -> dict[tuple[str, str, str], int]:
    query = (select(_SCHEDULE_OF_RUN, runs.c.trigger_type, runs.c.status, func.count()).select_from(_WITH_PARENT)
             .group_by(_SCHEDULE_OF_RUN, runs.c.trigger_type, runs.c.status))
    counts = {(names.get(sid, ""), trigger, status): int(n) for sid, trigger, status, n in conn.execute(query)}
    # Every status of a known (schedule, trigger) pair is exported, zeros included: a series that
    # vanishes when its count drops to 0 leaves alerts such as `status="FAILED" > 0` stuck on stale data.
    pairs = {(s, t) for s, t, _ in counts} | {(name, RunTrigger.SCHEDULED.value) for name in live}
    return {(s, t, status.value): counts.get((s, t, status.value), 0) for s, t in pairs for status in RunStatus}


def _greatest(conn: Connection, *values: Any) -> Any:
    # SQLite's multi-argument max() is its GREATEST; fixed-width UTC text compares in time order.
    return func.greatest(*values) if conn.dialect.name == "postgresql" else func.max(*values)


def _pending_ages(conn: Connection, names: dict[int | None, str], now: datetime) -> dict[str, float]:
    """Per schedule, seconds its longest-waiting run has waited: QUEUED, PENDING or RETRY_PENDING with
    ``not_before`` passed, or MANUAL_REQUIRED.

    A run has waited since the latest of its creation, its ``not_before`` and its last
    claim: a run re-queued after a failure is not as old as its ``created_at``.
    """
    created = runs.c.created_at
    since = _greatest(conn, created, func.coalesce(runs.c.not_before, created),
                      func.coalesce(runs.c.claimed_at, created))
    query = (select(_SCHEDULE_OF_RUN, type_coerce(func.min(since), UTCDateTime())).select_from(_WITH_PARENT)
             .where(runs.c.status.in_([s.value for s in PENDING_STATUSES]),
                    or_(runs.c.not_before.is_(None), runs.c.not_before <= now))
             .group_by(_SCHEDULE_OF_RUN))
    return {names.get(sid, ""): max(0.0, (now - oldest).total_seconds())
            for sid, oldest in conn.execute(query) if oldest is not None}


def _stalled(conn: Connection, now: datetime) -> int:
    # RUNNING rows are bounded by the number of workers; policies keeps the one definition of "stalled".
    query = select(runs.c.claimed_at, runs.c.max_runtime_s, runs.c.lease_until).where(
        runs.c.status == RunStatus.RUNNING.value)
    return sum(1 for claimed_at, max_runtime_s, lease_until in conn.execute(query)
               if policies.is_stalled(RunStatus.RUNNING, claimed_at, lease_until,
                                      timedelta(seconds=max_runtime_s), now))


def _in_progress(conn: Connection, names: dict[int | None, str],
                 now: datetime) -> tuple[dict[str, int], dict[str, float]]:
    """Per schedule, its runs RUNNING or WAITING for their children, and the longest one's seconds since it started."""
    query = (select(runs.c.schedule_id, func.count(), type_coerce(func.min(runs.c.started_at), UTCDateTime()))
             .where(runs.c.status.in_([s.value for s in IN_PROGRESS]), runs.c.schedule_id.is_not(None))
             .group_by(runs.c.schedule_id))
    counts: dict[str, int] = {}
    ages: dict[str, float] = {}
    for sid, count, started in conn.execute(query):
        counts[names.get(sid, "")] = int(count)
        ages[names.get(sid, "")] = max(0.0, (now - started).total_seconds()) if started is not None else 0.0
    return counts, ages


def _held(conn: Connection, names: dict[int | None, str]) -> dict[str, int]:
    """Per schedule, its runs (children included) not started and held because it is disabled (SPEC §15.3)."""
    family = family_schedule_id()
    query = (select(family, func.count())
             .where(runs.c.status.in_([s.value for s in HOLDABLE_STATUSES]), family_schedule_disabled())
             .group_by(family))
    return {names.get(sid, ""): int(n) for sid, n in conn.execute(query)}


def _late(conn: Connection, names: dict[int | None, str], deadlines: dict[int, timedelta],
          now: datetime) -> dict[str, int]:
    """Per schedule, its SCHEDULED runs still waiting or running past ``scheduled_for + deadline``.

    Read as (schedule, slot) of the active scheduled runs, bounded by the work in flight;
    the deadline is each schedule's (SPEC §15.1).
    """
    query = select(runs.c.schedule_id, runs.c.scheduled_for).where(
        runs.c.status.in_([s.value for s in ACTIVE_STATUSES]), runs.c.trigger_type == RunTrigger.SCHEDULED.value,
        runs.c.schedule_id.is_not(None))
    late: dict[str, int] = {}
    for sid, slot in conn.execute(query):
        deadline = deadlines.get(sid)
        if deadline is not None and slot + deadline <= now:
            late[names.get(sid, "")] = late.get(names.get(sid, ""), 0) + 1
    return late


def _last_success(conn: Connection, names: dict[int | None, str]) -> dict[str, datetime]:
    query = (select(runs.c.schedule_id, type_coerce(func.max(runs.c.completed_at), UTCDateTime()))
             .where(runs.c.status == RunStatus.SUCCESS.value, runs.c.schedule_id.is_not(None),
                    runs.c.completed_at.is_not(None))
             .group_by(runs.c.schedule_id))
    return {names.get(sid, ""): at for sid, at in conn.execute(query) if at is not None}


def _attempt_counts(conn: Connection, names: dict[int | None, str]) -> dict[tuple[str, str, str], int]:
    # An attempt still running has no outcome yet; counting it would make the counter go down.
    query = (select(_SCHEDULE_OF_RUN, attempts.c.trigger, attempts.c.outcome, func.count())
             .select_from(attempts.join(_WITH_PARENT, attempts.c.run_id == runs.c.id))
             .where(attempts.c.outcome.not_in([AttemptOutcome.RUNNING.value, AttemptOutcome.PENDING.value]))
             .group_by(_SCHEDULE_OF_RUN, attempts.c.trigger, attempts.c.outcome))
    totals: dict[tuple[str, str, str], int] = {}
    for sid, trigger, outcome, n in conn.execute(query):
        key = (names.get(sid, ""), trigger, outcome)
        totals[key] = totals.get(key, 0) + int(n)
    return totals


def _runs_created(conn: Connection, names: dict[int | None, str], live: Sequence[str]) -> dict[tuple[str, str], int]:
    """Per (schedule, trigger), the runs ever created: the rows (every revision and every status, a MISSED
    record too; child runs are their parent's) plus those a prune removed, so the counter never goes down.
    Runs pruned before prunes kept their triggers count under trigger ``unknown``."""
    query = (select(runs.c.schedule_id, runs.c.trigger_type, func.count())
             .where(runs.c.schedule_id.is_not(None)).group_by(runs.c.schedule_id, runs.c.trigger_type))
    created: dict[tuple[str, str], int] = {(name, RunTrigger.SCHEDULED.value): 0 for name in live}
    for sid, trigger, n in conn.execute(query):
        key = (names.get(sid, ""), trigger)
        created[key] = created.get(key, 0) + int(n)
    pruned = select(audit_events.c.schedule_id, audit_events.c.after).where(
        audit_events.c.action == retention.PRUNE_ACTION, audit_events.c.schedule_id.is_not(None))
    for sid, after in conn.execute(pruned):
        done = retention.range_from_audit(sid, after)
        if done is None:
            continue
        by_trigger = dict(done.triggers) or {"unknown": sum(done.counts.values())}
        for trigger, n in by_trigger.items():
            key = (names.get(sid, ""), str(trigger))
            created[key] = created.get(key, 0) + int(n)
    return created


def _slot_counts(conn: Connection, names: dict[int | None, str]) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """Slots not run per (schedule, reason), and overlap-skipped slots per schedule, from the scheduler's audit."""
    after = audit_events.c.after
    amount = func.coalesce(after["count"].as_integer(), after["estimated_slots"].as_integer(), 0)
    query = (select(audit_events.c.schedule_id, audit_events.c.action, func.sum(amount))
             .where(audit_events.c.action.in_((*NOT_RUN_ACTIONS, *OVERLAP_ACTIONS)))
             .group_by(audit_events.c.schedule_id, audit_events.c.action))
    not_run: dict[tuple[str, str], int] = {}
    skips: dict[str, int] = {}
    for sid, action, total in conn.execute(query):
        name = names.get(sid, "")
        if action in NOT_RUN_ACTIONS:
            key = (name, NOT_RUN_ACTIONS[action])
            not_run[key] = not_run.get(key, 0) + int(total or 0)
        else:
            skips[name] = skips.get(name, 0) + int(total or 0)
    return not_run, skips


def _undelivered(conn: Connection, live: Sequence[str]) -> dict[tuple[str, str], int]:
    """Per (schedule, state), alerts of the outbox not delivered: ``pending`` (never tried) or ``failing``."""
    state = case((events.c.attempts > 0, "failing"), else_="pending")
    query = (select(events.c.schedule, state, func.count())
             .where(events.c.status == alerts.EventStatus.PENDING.value).group_by(events.c.schedule, state))
    found = {(name, s): 0 for name in live for s in ("pending", "failing")}
    for schedule, kind, n in conn.execute(query):
        found[(schedule or "", kind)] = int(n)
    return found


def _scheduler_beat(conn: Connection) -> datetime | None:
    """The latest heartbeat of a scheduler (``serve``, ``cycle``, ``tick``), or None when none was ever recorded."""
    query = select(type_coerce(func.max(tables.instances.c.last_seen_at), UTCDateTime())).where(
        tables.instances.c.role.in_(instances.SCHEDULER_ROLES))
    beat: datetime | None = conn.execute(query).scalar()
    return beat


def _seconds(conn: Connection, later: Any, earlier: Any) -> ColumnElement[Any]:
    """``later - earlier`` in seconds, computed by the database."""
    if conn.dialect.name == "postgresql":
        # date_part is double precision; EXTRACT returns numeric (PostgreSQL 14+), several times slower here.
        return func.date_part("epoch", later - earlier)
    # julianday() carries each instant to within about 20 us; rounding the difference to 0.1 ms makes
    # whole-second durations exact again (bucket bounds) at half the cost of exact text arithmetic.
    return func.round((func.julianday(later) - func.julianday(earlier)) * 86400.0, 4)


def _histograms(conn: Connection, names: dict[int | None, str],
                live: Sequence[str]) -> tuple[dict[str, Histogram], dict[str, Histogram]]:
    """Both histograms per schedule in one scan of the started runs.

    The two durations are computed once per row in a materialised CTE; inlined,
    each of the 34 bucket CASEs would compute them again (seconds, not ms, on 100k runs).
    Duration: finished runs. Start delay: SCHEDULED runs that have started, running or finished.
    """
    finished = runs.c.status.in_(FINISHED_STATUSES) & runs.c.completed_at.is_not(None)
    started = (select(_SCHEDULE_OF_RUN.label("schedule_id"),
                      case((finished, _seconds(conn, runs.c.completed_at, runs.c.started_at)),
                           else_=None).label("duration"),
                      case((runs.c.trigger_type == RunTrigger.SCHEDULED.value,
                            _seconds(conn, runs.c.started_at, runs.c.scheduled_for)), else_=None).label("delay"))
               .select_from(_WITH_PARENT)
               .where(runs.c.started_at.is_not(None),
                      runs.c.status.in_([*FINISHED_STATUSES, *(s.value for s in IN_PROGRESS)]))
               .cte("started").prefix_with("MATERIALIZED"))
    columns: list[Any] = [started.c.schedule_id]
    for seconds in (started.c.duration, started.c.delay):
        columns += [func.count(seconds), func.sum(seconds)]
        columns += [func.sum(case((seconds <= bound, 1), else_=0)) for bound in BUCKETS_S]
    width = 2 + len(BUCKETS_S)

    def histogram(values: Sequence[Any]) -> Histogram:
        return Histogram(cumulative=tuple(int(v or 0) for v in values[2:]), count=int(values[0] or 0),
                         sum_s=float(values[1] or 0.0))

    empty = Histogram(cumulative=(0,) * len(BUCKETS_S), count=0, sum_s=0.0)
    durations = dict.fromkeys(live, empty)
    delays = dict.fromkeys(live, empty)
    for row in conn.execute(select(*columns).select_from(started).group_by(started.c.schedule_id)):
        name = names.get(row[0], "")
        durations[name] = histogram(row[1:1 + width])
        delays[name] = histogram(row[1 + width:])
    return durations, delays
