"""``reportflow metrics`` from real rows, on SQLite and PostgreSQL: the values an operator alerts on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.pool import WorkerPool
from engine.execution.worker import Worker
from engine.read import metrics
from engine.scheduling import definitions, tick
from engine.store import claims
from tests.support import make_runtime

T0 = datetime(2026, 9, 29, 10, 0, tzinfo=UTC)
HOURLY = dict(workflow="echo", cron="0 * * * *", timezone="UTC", grace="10m")
SCHEDULES = [
    dict(name="late", project="p-late", misfire="SKIP", **HOURLY),
    dict(name="busy", project="p-busy", misfire="CATCH_UP_ALL", overlap="SKIP_NEW", **HOURLY),
]


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample by its full name (``_total``, ``_bucket``... included), parsed as Prometheus would."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def value(parsed: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    matches = [v for found, v in parsed.get(name, []) if found == labels]
    assert len(matches) == 1, f"{name}{labels}: {len(matches)} samples in {parsed.get(name)}"
    return matches[0]


def setup(url: str) -> Any:
    rt = make_runtime(url, schedules=SCHEDULES, clock=ManualClock(T0))
    definitions.apply(rt)  # next slot 11:00
    return rt


def test_counts_misses_skips_attempts_and_timings(store_url: str) -> None:
    rt = setup(store_url)
    rt.clock.set(T0 + timedelta(hours=4, minutes=30))  # 14:30: 11:00..14:00 have all misfired
    tick.tick(rt)
    rt.clock.set(T0 + timedelta(hours=5, minutes=1))  # 15:01: the 15:00 slot is on time
    tick.tick(rt)

    before = samples(metrics.exposition(rt))
    # late (SKIP): 4 misfired slots MISSED, the on-time 15:00 QUEUED.
    assert value(before, "reportflow_runs", schedule="late", trigger="SCHEDULED", status="MISSED") == 4
    assert value(before, "reportflow_runs", schedule="late", trigger="SCHEDULED", status="QUEUED") == 1
    assert value(before, "reportflow_runs", schedule="late", trigger="SCHEDULED", status="FAILED") == 0
    assert value(before, "reportflow_missed_slots_total", schedule="late") == 4
    # busy (CATCH_UP_ALL, SKIP_NEW): 11:00 queued, 12:00-15:00 skipped by the overlap policy.
    assert value(before, "reportflow_runs", schedule="busy", trigger="SCHEDULED", status="QUEUED") == 1
    assert value(before, "reportflow_runs", schedule="busy", trigger="SCHEDULED", status="SKIPPED") == 4
    assert value(before, "reportflow_overlap_skips_total", schedule="busy") == 4
    assert value(before, "reportflow_missed_slots_total", schedule="busy") == 0
    # busy's 11:00 run has waited since the 14:30 tick created it.
    assert value(before, "reportflow_oldest_pending_age_seconds") == 31 * 60
    assert "reportflow_attempts_total" not in before
    next_slot = (T0 + timedelta(hours=6)).timestamp()
    assert value(before, "reportflow_schedule_next_run_timestamp", schedule="late") == next_slot
    assert value(before, "reportflow_schedule_next_run_timestamp", schedule="busy") == next_slot
    assert "reportflow_last_success_timestamp_seconds" not in before

    worker = Worker(rt, "w1")
    for _ in range(2):
        rt.clock.advance(timedelta(seconds=2))
        outcome = worker.run_one()
        assert outcome is not None and outcome.status is RunStatus.SUCCESS
    assert worker.run_one() is None
    worker.close()

    after = samples(metrics.exposition(rt))
    assert value(after, "reportflow_runs", schedule="late", trigger="SCHEDULED", status="SUCCESS") == 1
    assert value(after, "reportflow_runs", schedule="busy", trigger="SCHEDULED", status="SUCCESS") == 1
    assert value(after, "reportflow_runs", schedule="busy", trigger="SCHEDULED", status="QUEUED") == 0
    assert value(after, "reportflow_attempts_total", schedule="late", trigger="scheduled", outcome="success") == 1
    assert value(after, "reportflow_attempts_total", schedule="busy", trigger="scheduled", outcome="success") == 1
    assert value(after, "reportflow_oldest_pending_age_seconds") == 0
    assert value(after, "reportflow_stalled_runs") == 0
    # The worker ran busy's older slot first, 2 s after 15:01, then late's at 15:01:04.
    assert value(after, "reportflow_last_success_timestamp_seconds", schedule="busy") == \
        (T0 + timedelta(hours=5, minutes=1, seconds=2)).timestamp()
    assert value(after, "reportflow_last_success_timestamp_seconds", schedule="late") == \
        (T0 + timedelta(hours=5, minutes=1, seconds=4)).timestamp()

    # The manual clock does not move during a run: both took 0 s.
    for name in ("busy", "late"):
        assert value(after, "reportflow_run_duration_seconds_count", schedule=name) == 1
        assert value(after, "reportflow_run_duration_seconds_bucket", schedule=name, le="0.01") == 1
        assert value(after, "reportflow_run_duration_seconds_sum", schedule=name) == 0
    # Start delays, per schedule: 4h01m02s (busy's misfired 11:00 slot) and 64 s (late's 15:00 slot).
    assert value(after, "reportflow_start_delay_seconds_sum", schedule="busy") == 4 * 3600 + 62
    assert value(after, "reportflow_start_delay_seconds_sum", schedule="late") == 64
    assert value(after, "reportflow_start_delay_seconds_bucket", schedule="late", le="60.0") == 0
    assert value(after, "reportflow_start_delay_seconds_bucket", schedule="late", le="120.0") == 1
    assert value(after, "reportflow_start_delay_seconds_bucket", schedule="busy", le="3600.0") == 0
    assert value(after, "reportflow_start_delay_seconds_bucket", schedule="busy", le="+Inf") == 1
    rt.store.dispose()


def test_stalled_run_and_too_old_slots(store_url: str) -> None:
    rt = setup(store_url)
    rt.clock.set(T0 + timedelta(days=10, minutes=1))  # ten days down: past the 7-day catch-up window
    report = tick.tick(rt)
    assert report.too_old_slots > 0
    # A worker that claims a run and keeps its lease alive, but never finishes.
    with rt.store.write() as conn:
        claim = claims.acquire_run(conn, worker_id="slow", now=rt.clock.now(),
                                     lease_until=rt.clock.now() + timedelta(hours=2),
                                     steps_by_workflow={"echo": ["ECHO"]}, projects=None, backfill_limit=1)
    assert claim is not None
    assert value(samples(metrics.exposition(rt)), "reportflow_stalled_runs") == 0
    rt.clock.advance(timedelta(minutes=31))  # past the default max_runtime of 30 min, lease still held
    parsed = samples(metrics.exposition(rt))
    assert value(parsed, "reportflow_stalled_runs") == 1
    assert value(parsed, "reportflow_runs", schedule="busy", trigger="SCHEDULED",
                 status="RUNNING") == 1
    # Both schedules lost the same estimated range beyond the window; in it, late (SKIP) missed every
    # misfired slot (all but 10:00), busy (CATCH_UP_ALL) ran the first and overlap-skipped the rest.
    too_old_each = report.too_old_slots // 2
    assert too_old_each > 0
    assert value(parsed, "reportflow_missed_slots_total", schedule="late") == 7 * 24 - 1 + too_old_each
    assert value(parsed, "reportflow_missed_slots_total", schedule="busy") == too_old_each
    assert value(parsed, "reportflow_overlap_skips_total", schedule="busy") == 7 * 24 - 1
    assert value(parsed, "reportflow_runs", schedule="late", trigger="SCHEDULED", status="MISSED") == 7 * 24 - 1
    rt.store.dispose()


def test_serve_metrics_port_scrapes_the_store_and_the_notification_failures(store_url: str,
                                                                              monkeypatch: Any) -> None:
    import urllib.request

    from engine.app import serve

    monkeypatch.setenv("RF_HOOK", "http://127.0.0.1:9/never")
    rt = make_runtime(store_url, schedules=SCHEDULES, clock=ManualClock(T0),
                      extra={"notify": {"webhook_env": "RF_HOOK"}})
    definitions.apply(rt)
    rt.clock.set(T0 + timedelta(hours=1, minutes=1))
    tick.tick(rt)
    assert rt.transports.post_webhook({"event": "run_failed", "run_id": 1}) == "ConnectError"
    rt.transports.count_failure("run_failed")  # what the sender does with a refused send
    server = serve._start_metrics(rt, 0)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            first = samples(response.read().decode())
        WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
        with urllib.request.urlopen(url, timeout=10) as response:
            second = samples(response.read().decode())
    finally:
        server.shutdown()
        server.server_close()
    assert value(first, "reportflow_runs", schedule="late", trigger="SCHEDULED", status="QUEUED") == 1
    assert value(first, "reportflow_notification_failures_total", event="run_failed") == 1
    # Each scrape reads the store afresh.
    assert value(second, "reportflow_runs", schedule="late", trigger="SCHEDULED", status="SUCCESS") == 1
    assert value(second, "reportflow_runs", schedule="late", trigger="SCHEDULED", status="QUEUED") == 0


def test_the_model_hosts_pool_and_its_slots_held(store_url: str, tmp_path: Any, runtime: Any) -> None:
    """A model host's generation pool, from any process: its [llm] slots and how many are held now."""
    from engine.plugins.contract import node_name
    from workflows import providers

    host = "http://127.0.0.1:11434"
    rt = runtime(store_url, at=T0, schedules=[dict(name="d", workflow="daily_report", project="p", cron="0 19 * * *",
                                                  timezone="UTC")],
                 config={"llm": {"provider": "ollama", "host": host, "slots": 3},
                         "projects": [{"key": "p", "repo": str(tmp_path)}]})
    pool = providers.pool_name(host, node_name())
    parsed = samples(metrics.exposition(rt))
    assert (value(parsed, "reportflow_pool_slots", pool=pool), value(parsed, "reportflow_pool_slots_held", pool=pool)) \
        == (3, 0)
    with rt.store.slot(pool, 3), rt.store.slot(pool, 3):  # two generations running
        parsed = samples(metrics.exposition(rt))
        assert value(parsed, "reportflow_pool_slots_held", pool=pool) == 2
    assert value(samples(metrics.exposition(rt)), "reportflow_pool_slots_held", pool=pool) == 0
