"""Alerts for FAILED runs, MISSED/MANUAL_REQUIRED slots, stalled runs and silent schedules: recorded, then sent."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from engine.core.clock import ManualClock
from engine.execution import reconciler
from engine.execution.pool import WorkerPool
from engine.execution.worker import Worker
from engine.operations import outbox_sender
from engine.read import metrics
from engine.scheduling import definitions, tick
from engine.store import claims, outbox, run_rows
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime, manual_run, write_config

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


class Hook:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.events.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook?token=s3cret"

    def names(self) -> list[str]:
        return [e["event"] for e in self.events]


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hook]:
    h = Hook()
    monkeypatch.setenv("RF_HOOK", h.url)
    yield h
    h.server.shutdown()
    h.server.server_close()


def test_failures_missed_slots_stalled_and_silent_are_notified(sqlite_url: str, tmp_path: Path, hook: Hook,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    registry = {"four_steps": FOUR_STEPS}
    spec = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
                misfire="SKIP", overlap="ALLOW", max_runtime="10m")
    rt = make_runtime(sqlite_url, schedules=[spec], clock=ManualClock(T0), registry=registry,
                      extra={"notify": {"webhook_env": "RF_HOOK"},
                             "testflow": {"log": str(tmp_path / "log"), "fail": {"ONE": 9},
                                          "fail_code": "NOTION_UNAUTHORIZED"}})
    definitions.apply(rt)
    rt.clock.set(T0 + timedelta(hours=3, minutes=5))
    tick.tick(rt)  # 10:00 and 11:00 MISSED, 12:00 queued
    assert hook.events == []  # recorded in the tick's transaction; sent by the sender, not the tick
    outbox_sender.deliver_pending(rt)
    first = hook.events[0]
    assert (first["event"], first["schedule"], first["counts"], first["severity"]) == (
        "slots_not_run", "four", {"MISSED": 2}, "warning")
    assert first["id"] and first["summary"].startswith("four: slots that will not run")
    Worker(rt, "w").run_one()  # permanent error: FAILED
    outbox_sender.deliver_pending(rt)
    assert hook.names()[-1] == "run_failed" and hook.events[-1]["error_code"] == "NOTION_UNAUTHORIZED"
    assert hook.events[-1]["run_id"] == 3 and hook.events[-1]["business_key"]
    # A run stuck past max_runtime under a live lease, and a scheduler gone quiet.
    now = rt.clock.now()
    with rt.store.write() as conn:
        run_rows.insert_run(conn, manual_run("x", now))
        claim = claims.acquire_run(conn, worker_id="slow", now=now - timedelta(minutes=20),
                                     lease_until=now + timedelta(hours=2),
                                     steps_by_workflow={"four_steps": FOUR_STEPS.step_names()}, projects=None,
                                     backfill_limit=1)
    assert claim is not None
    rt.clock.set(T0 + timedelta(hours=4, minutes=30))
    reconciler.sweep(rt)
    reconciler.sweep(rt)  # recorded once, not every sweep
    outbox_sender.deliver_pending(rt)
    outbox_sender.deliver_pending(rt)  # nothing is sent twice once delivered
    assert hook.names().count("stalled") == 1 and hook.names().count("silent") == 1
    # Nobody ticked for 13:00: that period is also late (its deadline, grace + max_runtime, has passed).
    assert [e["scheduled_for"] for e in hook.events if e["event"] == "run_late"] == ["2026-09-29T13:00:00Z"]
    assert len(hook.events) == len({e["id"] for e in hook.events}) == 5
    assert "s3cret" not in caplog.text


def test_a_dead_webhook_never_fails_the_run(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_HOOK", "http://127.0.0.1:9/never")  # nothing listens on the discard port
    spec = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
                misfire="CATCH_UP_ALL", overlap="ALLOW")
    rt = make_runtime(sqlite_url, schedules=[spec], clock=ManualClock(T0), registry={"four_steps": FOUR_STEPS},
                      extra={"notify": {"webhook_env": "RF_HOOK"},
                             "testflow": {"log": str(tmp_path / "log"), "fail": {"TWO": 9},
                                          "fail_code": "NOTION_UNAUTHORIZED"}})
    definitions.apply(rt)
    rt.clock.set(T0 + timedelta(hours=2, minutes=5))
    assert tick.tick(rt).runs_created == 2
    # Each run fails permanently, so a run_failed alert is due, and the webhook is down.
    done = WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    assert [o.status.value for o in done] == ["FAILED", "FAILED"]  # the worker carried on to the second run
    with rt.store.read() as conn:
        recorded = run_rows.list_runs(conn)
    assert {(r.status.value, r.error_code) for r in recorded} == {("FAILED", "NOTION_UNAUTHORIZED")}
    sent = outbox_sender.deliver_pending(rt)
    assert sent.delivered == [] and len(sent.failed) == 1  # the first refusal ends the pass; the other waits
    assert rt.transports.failures.labels(event="run_failed")._value.get() == 1
    assert 'reportflow_notification_failures_total{event="run_failed"} 1.0' in metrics.exposition(rt)
    with rt.store.read() as conn:
        pending = outbox.list_events(conn, pending_only=True)
    assert sorted(e.event for e in pending) == ["run_failed", "run_failed"]
    assert [e.attempts for e in pending if e.attempts] == [1]


class HangingHook:
    """A webhook that accepts the request and answers only when released (or never, within the sender's timeout)."""

    def __init__(self) -> None:
        self.received = threading.Event()
        self.release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.set()
                hook.release.wait(60)
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


def _write_elsewhere(url: str) -> None:
    """A write by this process while the reconcile process waits on the webhook; fails fast if blocked."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1]
        lite = sqlite3.connect(path, timeout=1.0, isolation_level=None)
        try:
            lite.execute("BEGIN IMMEDIATE")  # the database write lock: 'database is locked' if reconcile holds it
            lite.execute("UPDATE schedules SET disabled_reason = 'x' WHERE 1 = 0")
            lite.execute("COMMIT")
        finally:
            lite.close()
        return
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            # A transaction left open across the webhook call shows as 'idle in transaction'.
            open_tx = conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                        "AND state LIKE 'idle in transaction%'")).scalar_one()
        assert open_tx == 0, "the reconciler holds a transaction open while it calls the webhook"
    finally:
        engine.dispose()


def test_a_hanging_webhook_does_not_hold_the_database_during_reconcile(store_url: str, tmp_path: Path) -> None:
    from tests.acceptance import procs

    hook = HangingHook()
    try:
        schedules_ = [dict(name="quiet", workflow="echo", project="p1", cron="0 * * * *", timezone="UTC")]
        config = write_config(tmp_path / "reportflow.toml", db_url=store_url,
                              sections={"notify": {"webhook_env": "RF_HOOK"}}, schedules=schedules_)
        applied = procs.run(tmp_path, config, "schedules", "apply", now="2026-09-29T09:00:00Z")
        assert applied.returncode == 0, applied.stderr
        # No scheduler ticked: at 11:00 the 10:00 slot is past its grace, so reconcile notifies a silent schedule.
        proc = procs.spawn(tmp_path, config, "reconcile", now="2026-09-29T11:00:00Z", env={"RF_HOOK": hook.url})
        assert hook.received.wait(120), "reconcile never called the webhook"
        _write_elsewhere(store_url)
        hook.release.set()
        out, log_text = procs.finish(proc, timeout=120)
        assert proc.returncode == 0, log_text
        assert "schedule_silent" in log_text
    finally:
        hook.release.set()
        hook.server.shutdown()
        hook.server.server_close()
