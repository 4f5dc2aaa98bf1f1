"""``reportflow metrics``: the Prometheus text exposition (SPEC §9, §15.8), computed from the database.

Every value is read at ``rt.clock.now()`` in one read transaction: the SQL is the
store's (``engine.store.metric_facts``, which says what each value counts); this
module adds what needs cron or other stores (success rate, freshness and its target,
stuck runs) and turns the snapshot into metric families. No process-global registry:
each exposition builds its own ``CollectorRegistry``. Names follow seed 003's list
where they fit: runs created (``scheduled_request_created_count``), slots not run
(``missed_request_count``), overlap skips, oldest pending age
(``job_request_pending_age``), start delay (``trigger_to_start_lag``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
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
from sqlalchemy.engine import Connection

from engine.core.models import PeriodKind
from engine.execution import healer
from engine.runtime import Runtime
from engine.store import metric_facts, periods, schedule_rows, waiting

DEFAULT_SLO_WINDOW = timedelta(days=30)
DEFAULT_STUCK_AFTER = timedelta(minutes=30)


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


def read_snapshot(conn: Connection, now: datetime, *, slo_window: timedelta = DEFAULT_SLO_WINDOW,
                  stuck_after: timedelta = DEFAULT_STUCK_AFTER,
                  period_kind: Callable[[str], PeriodKind | None] | None = None) -> metric_facts.Snapshot:
    """Every metric at ``now`` inside the caller's transaction: the store's facts, each live schedule's success
    rate, freshness and freshness target over ``slo_window``, and the runs stuck past ``stuck_after``.

    ``period_kind`` (``Runtime.period_kind``): each workflow's period, so periods are judged by business key.
    """
    snapshot = metric_facts.read_snapshot(conn, now)
    measured: dict[str, tuple[float, float | None]] = {}
    targets: dict[str, float] = {}
    for schedule in schedule_rows.list_schedules(conn):
        kind = period_kind(schedule.spec.workflow) if period_kind is not None else None
        slo = periods.measure(conn, schedule, now, slo_window, kind)
        if slo.success_rate is not None:  # freshness None: only periods from before the schedule existed
            measured[schedule.name] = (slo.success_rate, slo.freshness)
        if schedule.spec.freshness_target is not None:
            targets[schedule.name] = schedule.spec.freshness_target
    stuck = dict.fromkeys(snapshot.in_progress, 0)
    for found in waiting.find_stuck(conn, now, stuck_after):
        stuck[found.schedule or ""] = stuck.get(found.schedule or "", 0) + 1
    return dataclasses.replace(snapshot, slo=measured, freshness_target=targets, stuck=stuck)


# --- exposition ---------------------------------------------------------------------------------

class StoreCollector(Collector):
    """Yields the metric families of a ``Snapshot`` read at ``rt.clock.now()`` on each collection."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def collect(self) -> Iterator[Metric]:
        """The gauges, counters and histograms, read from the database at scrape time."""
        now = self.rt.clock.now()
        notify = self.rt.config.notify
        with self.rt.store.read() as conn:
            snapshot = read_snapshot(conn, now, slo_window=notify.slo_window, stuck_after=notify.stuck_after,
                                     period_kind=self.rt.period_kind)
        yield from families(snapshot, now)
        yield from pool_families(self.rt)


def pool_families(rt: Runtime) -> Iterator[Metric]:
    """Each provider pool of this node's configuration (a model host's generation slots): its size and how many
    are held now. A pool shared by nodes is seen whole from any of them; a node's own, from that node."""
    pools = sorted({p.pool for p in healer.providers_in_use(rt).values() if p.pool is not None})
    size = GaugeMetricFamily("reportflow_pool_slots", "Slots of a provider's pool (a model host's [llm] slots).",
                             labels=["pool"])
    held = GaugeMetricFamily("reportflow_pool_slots_held", "Slots of the pool held now (generations running).",
                             labels=["pool"])
    for name, count in pools:
        size.add_metric([name], count)
        held.add_metric([name], rt.store.slots_held(name, count))
    yield size
    yield held


def families(snap: metric_facts.Snapshot, now: datetime | None = None) -> Iterator[Metric]:
    """The metric families for ``snap`` (SPEC §9 and §15.8), label values sorted for a stable output."""
    runs_family = GaugeMetricFamily("reportflow_runs", "Runs per schedule, trigger and current status.",
                                    labels=["schedule", "trigger", "status"])
    for labels, value in sorted(snap.runs.items()):
        runs_family.add_metric(list(labels), value)
    yield runs_family
    yield _labelled(CounterMetricFamily, "reportflow_runs_created_total",
                    "Runs created per schedule and trigger (every row: revisions and MISSED, SKIPPED, "
                    "MANUAL_REQUIRED records too; pruned ones stay counted).", ["schedule", "trigger"],
                    snap.runs_created)
    yield GaugeMetricFamily(
        "reportflow_oldest_pending_age_seconds",
        "Seconds the longest-waiting run has waited: QUEUED, PENDING or RETRY_PENDING (not_before passed), "
        "or MANUAL_REQUIRED.", value=snap.oldest_pending_age_s)
    yield _per_schedule(GaugeMetricFamily, "reportflow_schedule_oldest_pending_age_seconds",
                        "Per schedule, seconds its longest-waiting run has waited (MANUAL_REQUIRED included).",
                        snap.pending_age_s)
    yield GaugeMetricFamily("reportflow_stalled_runs",
                            "Runs RUNNING past their max_runtime whose lease is still renewed.",
                            value=snap.stalled_runs)
    yield _per_schedule(GaugeMetricFamily, "reportflow_stuck_runs",
                        "Runs waiting unclaimed past [notify] stuck_after with no moving queue (run_stuck).",
                        snap.stuck)
    yield _per_schedule(GaugeMetricFamily, "reportflow_late_runs",
                        "SCHEDULED runs still waiting or running past scheduled_for + deadline.", snap.late)
    yield _per_schedule(GaugeMetricFamily, "reportflow_held_runs",
                        "Runs not started that no worker claims because their schedule is disabled.", snap.held)
    yield _per_schedule(GaugeMetricFamily, "reportflow_runs_in_progress",
                        "Runs RUNNING, or WAITING for their child runs.", snap.in_progress)
    yield _per_schedule(GaugeMetricFamily, "reportflow_run_in_progress_seconds",
                        "Seconds since the longest run in progress started (0 when none is).", snap.in_progress_age_s)
    yield _labelled(GaugeMetricFamily, "reportflow_undelivered_alerts",
                    "Alerts recorded and not delivered yet: pending (never tried) or failing (tried, retried "
                    "with backoff).", ["schedule", "state"], snap.undelivered)
    if snap.scheduler_beat_at is not None:
        yield GaugeMetricFamily("reportflow_scheduler_last_beat_timestamp_seconds",
                                "The latest heartbeat of a scheduler (serve, cycle or tick), Unix time.",
                                value=snap.scheduler_beat_at.timestamp())
        if now is not None:
            yield GaugeMetricFamily("reportflow_scheduler_beat_age_seconds",
                                    "Seconds since the latest heartbeat of a scheduler (serve, cycle or tick).",
                                    value=max(0.0, (now - snap.scheduler_beat_at).total_seconds()))
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
                        {name: fresh for name, (_, fresh) in snap.slo.items() if fresh is not None})
    yield _per_schedule(GaugeMetricFamily, "reportflow_schedule_freshness_target",
                        "The schedule's freshness_target: below it, a freshness_low alert.", snap.freshness_target)
    attempts_family = CounterMetricFamily("reportflow_attempts_total",
                                          "Finished attempts per schedule, attempt trigger and outcome.",
                                          labels=["schedule", "trigger", "outcome"])
    for labels, value in sorted(snap.attempts.items()):
        attempts_family.add_metric(list(labels), value)
    yield attempts_family
    yield _per_schedule(CounterMetricFamily, "reportflow_missed_slots_total",
                        "Slots never run: MISSED by the misfire policy, MANUAL_REQUIRED, or beyond the catch-up "
                        "window (too_old, estimated).", snap.missed_slots)
    yield _labelled(CounterMetricFamily, "reportflow_slots_not_run_total",
                    "Slots not run per schedule and reason: misfire (MISSED), manual_required, too_old "
                    "(estimated), disabled (estimated), holiday, maintenance.", ["schedule", "reason"], snap.slots_not_run)
    yield _per_schedule(CounterMetricFamily, "reportflow_overlap_skips_total",
                        "Slots SKIPPED by the overlap policy.", snap.overlap_skips)
    yield _histogram("reportflow_run_duration_seconds",
                     "completed_at - started_at of finished runs, per schedule.", snap.run_duration)
    yield _histogram("reportflow_start_delay_seconds",
                     "started_at - scheduled_for of SCHEDULED runs that have started (running ones included), "
                     "per schedule.", snap.start_delay)


def _per_schedule(kind: Any, name: str, doc: str, values: dict[str, float] | dict[str, int]) -> Metric:
    family = kind(name, doc, labels=["schedule"])
    for schedule, value in sorted(values.items()):
        family.add_metric([schedule], value)
    return family  # type: ignore[no-any-return]


def _labelled(kind: Any, name: str, doc: str, labels: list[str],
              values: dict[tuple[str, str], int] | dict[tuple[str, str], float]) -> Metric:
    family = kind(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family  # type: ignore[no-any-return]


def _histogram(name: str, doc: str, by_schedule: dict[str, metric_facts.Histogram]) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=["schedule"])
    for schedule, hist in sorted(by_schedule.items()):
        buckets = [(repr(bound), count) for bound, count in zip(metric_facts.BUCKETS_S, hist.cumulative, strict=True)]
        buckets.append(("+Inf", hist.count))
        family.add_metric([schedule], buckets, sum_value=hist.sum_s)
    return family


