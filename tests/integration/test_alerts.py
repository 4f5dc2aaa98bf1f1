"""The alert outbox (SPEC §15.1): events recorded with their cause, sent at least once, once per id.

SQLite and PostgreSQL (``store_url``); the receivers are loopback servers
(``tests.fakes.webhook``), reached by the sender's urllib and by the real Apprise.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core import alerts
from engine.execution.pool import WorkerPool
from engine.operations import actions, outbox_sender
from engine.runtime import Runtime
from engine.scheduling import tick
from engine.store import outbox
from tests.fakes import webhook
from tests.flows.testflows import FOUR_STEPS
from tests.support import RuntimeFactory

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


SPEC = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
            misfire="CATCH_UP_ALL", overlap="ALLOW", criticality="normal")
FLOWS = {"four_steps": FOUR_STEPS}


def config(tmp: Path, *, fail: dict[str, int], notify: dict[str, str]) -> dict[str, Any]:
    """Alerts to ``notify``, one attempt per run, and the steps in ``fail`` failing (permanently)."""
    return {"notify": notify, "worker": {"max_attempts": 1},
            "testflow": {"log": str(tmp / "log"), "fail": fail, "fail_code": "NOTION_UNAUTHORIZED"}}


def _events(rt: Runtime) -> list[alerts.Alert]:
    with rt.store.read() as conn:
        return outbox.list_events(conn)


def test_partial_success_raises_run_partial_and_a_later_success_recovered(store_url: str, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          runtime: RuntimeFactory) -> None:
    with webhook.serve() as hook:
        monkeypatch.setenv("RF_HOOK", hook.url)
        rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, installed=False,
                     config=config(tmp_path, fail={"FOUR": 1}, notify={"webhook_env": "RF_HOOK"}), apply=True)
        rt.clock.set(T0 + timedelta(hours=1, minutes=1))
        tick.tick(rt)
        [outcome] = WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
        assert outcome.status.value == "PARTIAL_SUCCESS"
        [partial] = _events(rt)
        assert (partial.event, partial.severity.value, partial.run_id) == ("run_partial", "warning", outcome.run_id)
        assert "FOUR" in partial.summary and "NOTION_UNAUTHORIZED" in partial.summary
        actions.retry(rt, outcome.run_id, from_step="FOUR")  # the step passes this time
        [again] = WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
        assert again.status.value == "SUCCESS"
        outbox_sender.deliver_pending(rt)
    assert [r.body["event"] for r in hook.received] == ["run_partial", "recovered"]
    recovered = hook.received[1].body
    assert recovered["severity"] == "info" and recovered["business_key"] == partial.business_key
    # Issue 43, item 6: the recovered alert names its run, as the page's /alerts links it.
    assert [e.run_id for e in _events(rt) if e.event == "recovered"] == [outcome.run_id]


def test_a_webhook_down_then_back_receives_everything_once_per_id(store_url: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  runtime: RuntimeFactory) -> None:
    with webhook.serve() as hook:
        monkeypatch.setenv("RF_HOOK", hook.url)
        rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, installed=False,
                     config=config(tmp_path, fail={"ONE": 99}, notify={"webhook_env": "RF_HOOK"}), apply=True)
        rt.clock.set(T0 + timedelta(hours=3, minutes=1))
        tick.tick(rt)
        assert [o.status.value for o in WorkerPool(rt, "w", concurrency=1).work(until_idle=True)] == ["FAILED"] * 3
        for status in (503, 503, 302, 500, 500, 500, 500, 500, 500):  # down, then a redirect (not followed)
            hook.fail_next(status)
        passes = 0
        while sum(1 for r in hook.received if r.status == 200) < 3:
            passes += 1
            assert passes < 50, [r.status for r in hook.received]
            report = outbox_sender.deliver_pending(rt)
            with rt.store.read() as conn:
                waiting = [e for e in outbox.list_events(conn, pending_only=True) if e.next_try_at]
            # Backoff: never more than 15 minutes between tries.
            assert all(e.next_try_at is not None and e.next_try_at - rt.clock.now() <= timedelta(minutes=15)
                       for e in waiting)
            if report.failed:
                rt.clock.advance(timedelta(minutes=15))
    delivered = [r.body for r in hook.received if r.status == 200]
    assert len(delivered) == 3 and len({b["id"] for b in delivered}) == 3
    assert {b["event"] for b in delivered} == {"run_failed"}
    assert [r.status for r in hook.received][:9] == [503, 503, 302, 500, 500, 500, 500, 500, 500]
    # Every try of an id carried the same body (a receiver drops repeats by id).
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in hook.received:
        by_id.setdefault(r.body["id"], []).append(r.body)
    assert all(len({str(sorted(b.items())) for b in bodies}) == 1 for bodies in by_id.values())
    assert not [e for e in _events(rt) if e.status.value == "PENDING"]
    assert outbox_sender.deliver_pending(rt).delivered == []  # delivered once: never again


def test_apprise_json_target_gets_title_body_and_type(store_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, runtime: RuntimeFactory) -> None:
    with webhook.serve() as hook:
        monkeypatch.setenv("RF_APPRISE", hook.url.replace("http://", "json://"))
        rt = runtime(store_url, schedules=[{**SPEC, "criticality": "critical"}], at=T0, workflows=FLOWS, installed=False,
                     config=config(tmp_path, fail={"ONE": 99}, notify={"apprise_env": "RF_APPRISE"}), apply=True)
        rt.clock.set(T0 + timedelta(hours=2, minutes=1))
        tick.tick(rt)
        WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
        assert outbox_sender.deliver_pending(rt).failed == []
    bodies = [r.body for r in hook.received]
    assert [b["title"] for b in bodies] == ["reportflow: run_failed four"] * 2
    # critical: warning at c = 1, critical (Apprise "failure") from c = 2.
    assert [b["type"] for b in bodies] == ["warning", "failure"]
    assert all("NOTION_UNAUTHORIZED" in b["message"] and "four_steps:p1:" in b["message"] for b in bodies)


def test_low_criticality_is_recorded_quietly_until_the_third_failed_period(store_url: str, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            runtime: RuntimeFactory) -> None:
    with webhook.serve() as hook:
        monkeypatch.setenv("RF_HOOK", hook.url)
        rt = runtime(store_url, schedules=[{**SPEC, "criticality": "low"}], at=T0, workflows=FLOWS, installed=False,
                     config=config(tmp_path, fail={"ONE": 99}, notify={"webhook_env": "RF_HOOK"}), apply=True)
        rt.clock.set(T0 + timedelta(hours=3, minutes=1))
        tick.tick(rt)
        WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
        outbox_sender.deliver_pending(rt)
    recorded = sorted(_events(rt), key=lambda e: e.run_id or 0)
    assert [(e.severity.value, e.status.value) for e in recorded] == [
        ("info", "QUIET"), ("info", "QUIET"), ("warning", "DELIVERED")]
    assert [r.body["run_id"] for r in hook.received] == [recorded[2].run_id]


def test_events_are_recorded_without_a_webhook_and_a_replayed_tick_adds_none(store_url: str,
                                                                           tmp_path: Path,
                                                                           runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[{**SPEC, "misfire": "SKIP"}], at=T0, workflows=FLOWS, installed=False,
                 config=config(tmp_path, fail={}, notify={}), apply=True)
    rt.clock.set(T0 + timedelta(hours=3, minutes=5))
    tick.tick(rt)  # two slots MISSED
    tick.tick(rt)
    assert outbox_sender.deliver_pending(rt).delivered == []
    [missed] = _events(rt)
    assert missed.event == "slots_not_run" and missed.status.value == "PENDING"
    assert Counter(missed.details["counts"]) == {"MISSED": 2}  # type: ignore[index]


def test_serve_sends_alerts_from_its_sender_thread(store_url: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, runtime: RuntimeFactory) -> None:
    import threading

    from engine.app import serve

    with webhook.serve() as hook:
        monkeypatch.setenv("RF_HOOK", hook.url)
        rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, installed=False,
                     config=config(tmp_path, fail={"ONE": 99}, notify={"webhook_env": "RF_HOOK"}), apply=True)
        rt.clock.set(T0 + timedelta(hours=1, minutes=1))
        stop = threading.Event()
        thread = threading.Thread(target=serve.serve, args=(rt,), kwargs={"stop": stop, "worker_id": "srv"})
        thread.start()
        try:
            deadline = datetime.now(UTC) + timedelta(seconds=60)  # noqa: DTZ005 - a test's own timeout
            while not [e for e in _events(rt) if e.event == "run_failed"] and datetime.now(UTC) < deadline:
                stop.wait(0.05)
        finally:
            stop.set()
            thread.join(60)
    assert [r.body["event"] for r in hook.received] == ["run_failed"]
    assert [e.status.value for e in _events(rt)] == ["DELIVERED"]
