"""``reportflow metrics``: the Prometheus text exposition (SPEC §9), computed from the database.

Every value is read at ``rt.clock.now()`` in one read transaction and
aggregated in SQL (GROUP BY, and SUM over CASE for histogram buckets), so the
cost grows with the number of schedules and label combinations, never with
loading run rows into Python. No process-global registry: each exposition
builds its own ``CollectorRegistry`` from a ``Snapshot``.

- Gauges describe rows whose status can change: run counts per
  (schedule, trigger, status), the age of the oldest waiting run, stalled
  runs, next slot and last success per schedule.
- Counters come from append-only rows: finished attempts, and the slot counts
  that the scheduler's audit events carry (``slots_missed``/``slots_too_old``,
  ``slots_overlap_skipped``).
- Histograms cover finished runs (SUCCESS, PARTIAL_SUCCESS, FAILED, CANCELLED
  with a start): duration ``completed_at - started_at``, and the start delay
  ``started_at - scheduled_for`` of SCHEDULED runs only (a backfill starts days
  after its slot by design and would drown the signal).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from sqlalchemy import case, func, or_, select, type_coerce
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from engine.core import policies
from engine.core.models import HOLDABLE_STATUSES, TERMINAL_STATUSES, AttemptOutcome, RunStatus, RunTrigger
from engine.runtime import Runtime
from engine.store import periods, schedule_rows
from engine.store.tables import attempts, audit_events, runs, schedules
from engine.store.types import UTCDateTime

# 10 ms (a trivial step on a warm worker) to 1 h (a CPU-bound LLM generation), roughly ×2.5 apart.
BUCKETS_S: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                                120.0, 300.0, 600.0, 1800.0, 3600.0)
FINISHED_STATUSES = tuple(sorted(s.value for s in TERMINAL_STATUSES))
MISSED_ACTIONS = ("slots_missed", "slots_too_old")
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
    run_duration: Histogram
    start_delay: Histogram
    slo: dict[str, tuple[float, float]] = field(default_factory=dict)  # (success rate, freshness), SPEC §15.2


def registry_for(rt: Runtime) -> CollectorRegistry:
    """A registry (not prometheus_client's global one) exposing the store's state and this process's counters.

    The store's families are read afresh on every scrape (``StoreCollector``);
    the transports' failure counter lives in this process.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(rt))
    registry.register(rt.transports.failures)
    return registry


def exposition(rt: Runtime) -> str:
    """The Prometheus text format (0.0.4) for the store's state at ``rt.clock.now()``."""
    return generate_latest(registry_for(rt)).decode("utf-8")


# --- reading: one aggregate query per metric family, in the store layer's Core style ------------

def read_snapshot(conn: Connection, now: datetime) -> Snapshot:
    """Read every metric at ``now`` inside the caller's transaction (a consistent view)."""
    names: dict[int | None, str] = {None: ""}
    live: list[str] = []
    next_run_at: dict[str, datetime] = {}
    for row in conn.execute(select(schedules.c.id, schedules.c.name, schedules.c.enabled, schedules.c.archived,
                                   schedules.c.next_run_at)):
        names[row.id] = row.name
        if not row.archived:
            live.append(row.name)
            if row.enabled and row.next_run_at is not None:
                next_run_at[row.name] = row.next_run_at
    missed, skips = _slot_counts(conn, names)
    duration, delay = _histograms(conn)
    return Snapshot(
        runs=_run_counts(conn, names, live),
        oldest_pending_age_s=_oldest_waiting_age(conn, now),
        stalled_runs=_stalled(conn, now),
        next_run_at=next_run_at,
        last_success_at=_last_success(conn, names),
        attempts=_attempt_counts(conn, names),
        missed_slots={name: missed.get(name, 0) for name in live} | missed,
        overlap_skips={name: skips.get(name, 0) for name in live} | skips,
        run_duration=duration,
        start_delay=delay,
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


def _oldest_waiting_age(conn: Connection, now: datetime) -> float:
    """Seconds the longest-waiting QUEUED/PENDING/RETRY_PENDING run (``not_before`` passed) has waited.

    It has waited since the latest of its creation, its ``not_before`` and its last
    claim: a run re-queued after a failure is not as old as its ``created_at``.
    """
    created = runs.c.created_at
    candidates = [created, func.coalesce(runs.c.not_before, created), func.coalesce(runs.c.claimed_at, created)]
    # SQLite's multi-argument max() is its GREATEST; fixed-width UTC text compares in time order.
    latest = func.greatest(*candidates) if conn.dialect.name == "postgresql" else func.max(*candidates)
    query = select(type_coerce(func.min(latest), UTCDateTime())).where(
        runs.c.status.in_(sorted(s.value for s in HOLDABLE_STATUSES)),
        or_(runs.c.not_before.is_(None), runs.c.not_before <= now))
    oldest = conn.execute(query).scalar()
    return max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0


def _stalled(conn: Connection, now: datetime) -> int:
    # RUNNING rows are bounded by the number of workers; policies keeps the one definition of "stalled".
    query = select(runs.c.claimed_at, runs.c.max_runtime_s, runs.c.lease_until).where(
        runs.c.status == RunStatus.RUNNING.value)
    return sum(1 for claimed_at, max_runtime_s, lease_until in conn.execute(query)
               if policies.is_stalled(RunStatus.RUNNING, claimed_at, lease_until,
                                      timedelta(seconds=max_runtime_s), now))


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


def _slot_counts(conn: Connection, names: dict[int | None, str]) -> tuple[dict[str, int], dict[str, int]]:
    """Missed (misfire and too_old) and overlap-skipped slots per schedule, from the scheduler's audit."""
    after = audit_events.c.after
    amount = func.coalesce(after["count"].as_integer(), after["estimated_slots"].as_integer(), 0)
    query = (select(audit_events.c.schedule_id, audit_events.c.action, func.sum(amount))
             .where(audit_events.c.action.in_(MISSED_ACTIONS + OVERLAP_ACTIONS))
             .group_by(audit_events.c.schedule_id, audit_events.c.action))
    missed: dict[str, int] = {}
    skips: dict[str, int] = {}
    for sid, action, total in conn.execute(query):
        target = missed if action in MISSED_ACTIONS else skips
        name = names.get(sid, "")
        target[name] = target.get(name, 0) + int(total or 0)
    return missed, skips


def _seconds(conn: Connection, later: Any, earlier: Any) -> ColumnElement[Any]:
    """``later - earlier`` in seconds, computed by the database."""
    if conn.dialect.name == "postgresql":
        # date_part is double precision; EXTRACT returns numeric (PostgreSQL 14+), several times slower here.
        return func.date_part("epoch", later - earlier)
    # julianday() carries each instant to within about 20 us; rounding the difference to 0.1 ms makes
    # whole-second durations exact again (bucket bounds) at half the cost of exact text arithmetic.
    return func.round((func.julianday(later) - func.julianday(earlier)) * 86400.0, 4)


def _histograms(conn: Connection) -> tuple[Histogram, Histogram]:
    """Both histograms in one scan of the finished runs.

    The two durations are computed once per row in a materialised CTE; inlined,
    each of the 34 bucket CASEs would compute them again (seconds, not ms, on 100k runs).
    """
    finished = (select(_seconds(conn, runs.c.completed_at, runs.c.started_at).label("duration"),
                       case((runs.c.trigger_type == RunTrigger.SCHEDULED.value,
                             _seconds(conn, runs.c.started_at, runs.c.scheduled_for)), else_=None).label("delay"))
                .where(runs.c.status.in_(FINISHED_STATUSES), runs.c.started_at.is_not(None),
                       runs.c.completed_at.is_not(None))
                .cte("finished").prefix_with("MATERIALIZED"))
    columns: list[Any] = []
    for seconds in (finished.c.duration, finished.c.delay):
        columns += [func.count(seconds), func.sum(seconds)]
        columns += [func.sum(case((seconds <= bound, 1), else_=0)) for bound in BUCKETS_S]
    row = list(conn.execute(select(*columns).select_from(finished)).one())
    width = 2 + len(BUCKETS_S)

    def histogram(values: list[Any]) -> Histogram:
        return Histogram(cumulative=tuple(int(v or 0) for v in values[2:]), count=int(values[0] or 0),
                         sum_s=float(values[1] or 0.0))

    return histogram(row[:width]), histogram(row[width:])


# --- exposition ---------------------------------------------------------------------------------

class StoreCollector(Collector):
    """Yields the metric families of a ``Snapshot`` read at ``rt.clock.now()`` on each collection."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def collect(self) -> Iterator[Metric]:
        """The gauges and counters, read from the database at scrape time."""
        now = self.rt.clock.now()
        with self.rt.store.read() as conn:
            snapshot = read_snapshot(conn, now)
            window = self.rt.config.notify.slo_window
            measured = {s.name: periods.measure(conn, s, now, window, self.rt.period_kind(s.spec.workflow))
                        for s in schedule_rows.list_schedules(conn)}
        snapshot = dataclasses.replace(snapshot, slo={name: (m.success_rate, m.freshness) for name, m in measured.items()
                                                      if m.success_rate is not None and m.freshness is not None})
        yield from families(snapshot)


def families(snap: Snapshot) -> Iterator[Metric]:
    """The SPEC §9 metric families for ``snap``, label values sorted for a stable output."""
    runs_family = GaugeMetricFamily("reportflow_runs", "Runs per schedule, trigger and current status.",
                                    labels=["schedule", "trigger", "status"])
    for labels, value in sorted(snap.runs.items()):
        runs_family.add_metric(list(labels), value)
    yield runs_family
    yield GaugeMetricFamily(
        "reportflow_oldest_pending_age_seconds",
        "Seconds the longest-waiting QUEUED, PENDING or RETRY_PENDING run (not_before passed) has waited.",
        value=snap.oldest_pending_age_s)
    yield GaugeMetricFamily("reportflow_stalled_runs",
                            "Runs RUNNING past their max_runtime whose lease is still renewed.",
                            value=snap.stalled_runs)
    yield _per_schedule(GaugeMetricFamily, "reportflow_schedule_next_run_timestamp",
                        "Next slot of each enabled schedule, Unix time.",
                        {name: at.timestamp() for name, at in snap.next_run_at.items()})
    yield _per_schedule(GaugeMetricFamily, "reportflow_last_success_timestamp_seconds",
                        "completed_at of each schedule's latest SUCCESS run, Unix time.",
                        {name: at.timestamp() for name, at in snap.last_success_at.items()})
    yield _per_schedule(GaugeMetricFamily, "reportflow_schedule_success_ratio",
                        "Periods due in [notify] slo_window whose latest revision is SUCCESS, over periods due.",
                        {name: rate for name, (rate, _) in snap.slo.items()})
    yield _per_schedule(GaugeMetricFamily, "reportflow_schedule_freshness_ratio",
                        "Periods due in [notify] slo_window that reached SUCCESS within their deadline, over periods due.",
                        {name: fresh for name, (_, fresh) in snap.slo.items()})
    attempts_family = CounterMetricFamily("reportflow_attempts_total",
                                          "Finished attempts per schedule, attempt trigger and outcome.",
                                          labels=["schedule", "trigger", "outcome"])
    for labels, value in sorted(snap.attempts.items()):
        attempts_family.add_metric(list(labels), value)
    yield attempts_family
    yield _per_schedule(CounterMetricFamily, "reportflow_missed_slots_total",
                        "Slots never run because they misfired (MISSED) or lay beyond the catch-up window.",
                        snap.missed_slots)
    yield _per_schedule(CounterMetricFamily, "reportflow_overlap_skips_total",
                        "Slots SKIPPED by the overlap policy.", snap.overlap_skips)
    yield _histogram("reportflow_run_duration_seconds",
                     "completed_at - started_at of finished runs.", snap.run_duration)
    yield _histogram("reportflow_start_delay_seconds",
                     "started_at - scheduled_for of finished SCHEDULED runs.", snap.start_delay)


def _per_schedule(kind: Any, name: str, doc: str, values: dict[str, float] | dict[str, int]) -> Metric:
    family = kind(name, doc, labels=["schedule"])
    for schedule, value in sorted(values.items()):
        family.add_metric([schedule], value)
    return family  # type: ignore[no-any-return]


def _histogram(name: str, doc: str, hist: Histogram) -> Metric:
    buckets = [(repr(bound), count) for bound, count in zip(BUCKETS_S, hist.cumulative, strict=True)]
    buckets.append(("+Inf", hist.count))
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=hist.sum_s)
