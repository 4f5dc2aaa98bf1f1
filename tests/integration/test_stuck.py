"""Stuck runs (SPEC §15.1 ``run_stuck``): found from the workers' heartbeats, alerted once, listed by doctor."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.execution import reconciler, step_call
from engine.read import doctor
from engine.scheduling import definitions, tick
from engine.store import claims, instances, outbox
from tests.flows.testflows import FOUR_STEPS
from tests.support import RuntimeFactory

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


SPEC = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
            misfire="CATCH_UP_ALL", overlap="ALLOW")


def config(tmp_path: Path) -> dict[str, Any]:
    return {"notify": {"stuck_after": "30m"}, "testflow": {"log": str(tmp_path / "log")}}


def test_a_stuck_run_gets_its_reason_when_no_worker_serves_its_project(store_url: str, tmp_path: Path,
                                                                       runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows={"four_steps": FOUR_STEPS}, installed=False,
                 config=config(tmp_path), apply=True)
    rt.clock.set(T0 + timedelta(hours=1, minutes=1))
    tick.tick(rt)
    for minutes in (10, 40, 45):  # a worker beats all along, but it can open only project p2's repository
        rt.clock.set(T0 + timedelta(hours=1, minutes=minutes))
        with rt.store.write() as conn:
            instances.beat(conn, instance_id="node-b:1", role="worker", host="node-b", pid=1, projects=["p2"],
                           now=rt.clock.now())
        report = reconciler.sweep(rt)
        if minutes == 10:
            assert report.stuck == []  # not yet stuck_after
    [found] = report.stuck
    assert found.reason == "no live worker serves project p1" and found.status == "QUEUED"
    with rt.store.read() as conn:
        [event] = [e for e in outbox.list_events(conn) if e.event == "run_stuck"]
    assert event.event == "run_stuck" and event.run_id == found.run_id
    assert "no live worker serves project p1" in event.summary and event.severity.value == "warning"
    listed = [f.message for f in doctor.check_runs(rt) if f.problem]
    assert any(f"run {found.run_id}" in m and "no live worker serves project p1" in m for m in listed)


def test_a_pending_run_names_the_run_it_waits_behind_and_a_disabled_schedule_says_so(store_url: str,
                                                                                     tmp_path: Path,
                                                                                     runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[{**SPEC, "overlap": "QUEUE_NEW"}], at=T0, workflows={"four_steps": FOUR_STEPS},
                 installed=False, config=config(tmp_path), apply=True)
    rt.clock.set(T0 + timedelta(hours=2, minutes=1))
    tick.tick(rt)  # 10:00 QUEUED, 11:00 PENDING behind it
    rt.clock.set(T0 + timedelta(hours=2, minutes=40))
    with rt.store.write() as conn:
        instances.beat(conn, instance_id="w:1", role="worker", host="h", pid=1, projects=None,
                       now=rt.clock.now())
    reasons = {s.status: s.reason for s in reconciler.find_stuck(rt, rt.clock.now())}
    assert reasons["PENDING"] is not None and reasons["PENDING"].startswith("waits behind run ")
    definitions.set_enabled(rt, "four", enabled=False, reason="maintenance")
    reasons = {s.status: s.reason for s in reconciler.find_stuck(rt, rt.clock.now())}
    assert set(reasons.values()) == {"schedule disabled"}


def test_a_run_behind_a_full_concurrency_cap_is_stuck_with_the_cap_as_its_reason(store_url: str, tmp_path: Path,
                                                                                 runtime: RuntimeFactory) -> None:
    other = dict(SPEC, name="other", project="p2")
    rt = runtime(store_url, schedules=[SPEC, other], at=T0, workflows={"four_steps": FOUR_STEPS}, installed=False,
                 config={**config(tmp_path), "limits": {"max_running": 1}}, apply=True)
    rt.clock.set(T0 + timedelta(hours=1, minutes=1))
    tick.tick(rt)
    with rt.store.write() as conn:  # a long run holds the only slot
        held = claims.acquire_run(conn, worker_id="node-a:1", now=rt.clock.now(),
                                  lease_until=rt.clock.now() + timedelta(hours=5),
                                  steps_by_workflow={"four_steps": FOUR_STEPS.step_names()}, projects=None,
                                  backfill_limit=1, caps=rt.config.limits.caps())
    assert held is not None
    with rt.store.write() as conn:
        assert claims.acquire_run(conn, worker_id="node-b:1", now=rt.clock.now(),
                                  lease_until=rt.clock.now() + timedelta(hours=5),
                                  steps_by_workflow={"four_steps": FOUR_STEPS.step_names()}, projects=None,
                                  backfill_limit=1, caps=rt.config.limits.caps()) is None
    rt.clock.set(T0 + timedelta(hours=1, minutes=45))
    with rt.store.write() as conn:
        instances.beat(conn, instance_id="node-b:1", role="worker", host="node-b", pid=1, projects=None,
                       now=rt.clock.now())
    [found] = reconciler.sweep(rt).stuck
    assert found.reason == "waits for max_running = 1 (1 running)" and found.status == "QUEUED"
    with rt.store.read() as conn:
        [event] = [e for e in outbox.list_events(conn) if e.event == "run_stuck"]
    assert "waits for max_running = 1 (1 running)" in event.summary
    # The engine's own report gives the same reason (what a step's ctx.engine_facts reads).
    facts = step_call._engine_facts(rt, T0, T0 + timedelta(days=1))
    assert [(s["status"], s["reason"]) for s in facts["stuck"]] == [("QUEUED", "waits for max_running = 1 (1 running)")]
