"""Webhook notifications for FAILED, MISSED/MANUAL_REQUIRED slots, stalled runs and silent schedules."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine import reconciler, scheduler, schedules
from engine.clock import ManualClock
from engine.store import claims
from engine.store import runs as run_rows
from engine.worker import Worker
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime

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


def test_failures_missed_slots_stalled_and_silent_are_notified(sqlite_url: str, tmp_path: Path, hook: Hook,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    registry = {"four_steps": FOUR_STEPS}
    spec = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
                misfire="SKIP", overlap="ALLOW", max_runtime="10m")
    rt = make_runtime(sqlite_url, schedules=[spec], clock=ManualClock(T0), registry=registry,
                      extra={"notify": {"webhook_env": "RF_HOOK"},
                             "testflow": {"log": str(tmp_path / "log"), "fail": {"ONE": 9},
                                          "fail_code": "NOTION_UNAUTHORIZED"}})
    schedules.apply(rt)
    rt.clock.set(T0 + timedelta(hours=3, minutes=5))
    scheduler.tick(rt)  # 10:00 and 11:00 MISSED, 12:00 queued
    assert hook.events[0] == {"event": "slots_not_run", "schedule": "four", "counts": {"MISSED": 2}}
    Worker(rt, "w").run_one()  # permanent error: FAILED
    assert hook.names()[-1] == "run_failed" and hook.events[-1]["error_code"] == "NOTION_UNAUTHORIZED"
    # A run stuck past max_runtime under a live lease, and a scheduler gone quiet.
    now = rt.clock.now()
    with rt.store.write() as conn:
        run_rows.insert_run(conn, {**_row(now), "idempotency_key": "x", "base_key": "x"})
        claim = claims.acquire_run(conn, worker_id="slow", now=now - timedelta(minutes=20),
                                     lease_until=now + timedelta(hours=2),
                                     steps_by_workflow={"four_steps": FOUR_STEPS.step_names()}, projects=None,
                                     backfill_limit=1)
    assert claim is not None
    rt.clock.set(T0 + timedelta(hours=4, minutes=30))
    reconciler.sweep(rt)
    reconciler.sweep(rt)  # notified once, not every sweep
    assert hook.names().count("run_stalled") == 1 and hook.names().count("schedule_silent") == 1
    assert "s3cret" not in caplog.text


def _row(now: datetime) -> dict[str, Any]:
    return dict(schedule_id=None, workflow="four_steps", project="p1", trigger_type="MANUAL", scheduled_for=now,
                business_key="k", revision=1, status="QUEUED", priority=30, pinned={"payload_version": 1},
                attempt_count=0, max_attempts=3, max_runtime_s=600, created_at=now, fence=0, cancel_requested=False)


def test_a_dead_webhook_never_fails_the_run(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_HOOK", "http://127.0.0.1:9/never")
    spec = dict(name="e", workflow="echo", project="p1", cron="0 * * * *", timezone="UTC", misfire="SKIP")
    rt = make_runtime(sqlite_url, schedules=[spec], clock=ManualClock(T0), extra={"notify": {"webhook_env": "RF_HOOK"}})
    schedules.apply(rt)
    rt.clock.set(T0 + timedelta(hours=3, minutes=5))
    assert scheduler.tick(rt).runs_created == 3
