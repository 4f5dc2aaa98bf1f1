"""Dependencies between schedules (SPEC §18) on SQLite and PostgreSQL: a dependent run is created on time
and WAITING, released by its upstream's SUCCESS (once, after a retry too), and past its window follows
``on_upstream`` with one alert; a disabled upstream never releases it."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core.models import Run, RunStatus
from engine.execution import reconciler
from engine.execution.worker import Worker
from engine.runtime import Runtime
from engine.scheduling import definitions, tick
from engine.store import audit_rows, ops_facts, outbox, run_rows
from engine.web.app import create_app
from steps import ops_markdown
from tests.flows.testflows import FOUR_STEPS
from tests.support import ManualRuntime, RuntimeFactory

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def _up_and_down(runtime: RuntimeFactory, url: str, tmp_path: Path, fail: dict[str, int] | None = None,
                 **after: Any) -> ManualRuntime:
    """``up`` and ``down`` (after ``up``, changed by ``after``) at 10:00, both slots ticked at 10:00:05."""
    up = dict(name="up", workflow="four_steps", project="p1", cron="0 10 * * *", timezone="UTC", misfire="RUN_ONCE")
    down = dict(name="down", workflow="four_steps", project="p2", cron="0 10 * * *", timezone="UTC",
                misfire="RUN_ONCE", after=["up"])
    down.update(after)
    rt = runtime(url, schedules=[up, down], at=T0, workflows={"four_steps": FOUR_STEPS},
                 config={"testflow": {"log": str(tmp_path / "steps.log"), "fail": fail or {}},
                         "worker": {"max_attempts": 3, "lease": "60s", "retry_backoff": "1s"}}, apply=True)
    rt.clock.set(T0 + timedelta(hours=1, seconds=5))  # 10:00:05, both slots due
    tick.tick(rt)
    return rt


def _client(rt: Runtime) -> TestClient:
    return TestClient(create_app(rt, token=None), base_url="http://127.0.0.1:8321", follow_redirects=False)


def _runs(rt: Runtime) -> dict[str, Run]:
    with rt.store.read() as conn:
        return {r.project: run_rows.get_run(conn, r.id) for r in run_rows.list_runs(conn)}


def _drain(rt: Runtime) -> list[str]:
    """Every claimable run worked to its end; the projects of the runs worked, in order."""
    worked = []
    while (outcome := Worker(rt, "w").run_one()) is not None:
        with rt.store.read() as conn:
            worked.append(run_rows.get_run(conn, outcome.run_id, detail=False).project)
    return worked


def _released(rt: Runtime, run_id: int) -> list[str]:
    with rt.store.read() as conn:
        return [e.action for e in audit_rows.list_audit(conn, run_id=run_id) if e.action.startswith("upstream_")]


def test_a_dependent_run_waits_and_its_upstreams_success_releases_it_once(store_url: str, tmp_path: Path,
                                                                          runtime: RuntimeFactory) -> None:
    rt = _up_and_down(runtime, store_url, tmp_path, fail={"TWO": 1})
    runs = _runs(rt)
    down = runs["p2"]
    assert down.status is RunStatus.WAITING and down.lease_owner is None
    assert down.upstream == (("up", "2026-12-02T10:00Z"),) and down.upstream_until == T0 + timedelta(hours=7)
    page = _client(rt)
    for path in (f"/runs/{down.id}", "/schedules/down"):  # the run page and the calendar say what it waits for
        assert "waits for up 2026-12-02T10:00Z" in page.get(path).text, path
    assert _drain(rt) == ["p1"]  # the upstream fails once: the dependent is not claimable meanwhile
    assert _runs(rt)["p1"].status is RunStatus.RETRY_PENDING and _runs(rt)["p2"].status is RunStatus.WAITING
    rt.clock.advance(timedelta(seconds=5))
    assert _drain(rt) == ["p1", "p2"]  # its retry succeeds and releases the dependent in the same commit
    rt.clock.advance(timedelta(seconds=5))
    assert _drain(rt) == ["p2"]  # the dependent's own step failed once too (the same test settings)
    lines = (tmp_path / "steps.log").read_text().splitlines()
    upstream_done = max(n for n, line in enumerate(lines) if line.startswith(f"end {runs['p1'].id} FOUR"))
    assert min(n for n, line in enumerate(lines) if line.startswith(f"start {down.id} ")) > upstream_done
    assert {p: r.status for p, r in _runs(rt).items()} == {"p1": RunStatus.SUCCESS, "p2": RunStatus.SUCCESS}
    assert _released(rt, down.id) == ["upstream_released"]
    reconciler.sweep(rt)  # the safety net finds nothing more to do
    assert _released(rt, down.id) == ["upstream_released"]
    with rt.store.read() as conn:  # the ops report lists it, with how long it waited
        facts = ops_facts.read(conn, T0, T0 + timedelta(days=1), rt.clock.now(), timedelta(minutes=30))
    assert facts["upstream_waits"] == [{"run": down.id, "schedule": "down", "business_key": "2026-12-02T10:00Z",
                                        "waited_s": 10, "outcome": "released"}]
    text = ops_markdown.render(facts, weekly=False, business_key="2026-12-02")
    assert f"- run {down.id} (down 2026-12-02T10:00Z): waited 10s, released" in text


def test_an_upstream_that_already_succeeded_releases_the_dependent_at_its_creation(
        store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = _up_and_down(runtime, store_url, tmp_path, cron="0 11 * * *")  # slots: it waits for the upstream's latest
    assert _drain(rt) == ["p1"]
    rt.clock.set(T0 + timedelta(hours=2, seconds=5))
    tick.tick(rt)
    down = _runs(rt)["p2"]
    assert down.status is RunStatus.QUEUED and down.upstream == (("up", "2026-12-02T10:00Z"),)
    assert _released(rt, down.id) == ["upstream_released"]
    assert _drain(rt) == ["p2"]


def test_disable_cancel_queued_cancels_a_run_waiting_for_its_upstream(store_url: str, tmp_path: Path,
                                                                      runtime: RuntimeFactory) -> None:
    rt = _up_and_down(runtime, store_url, tmp_path)
    down = _runs(rt)["p2"]
    assert down.status is RunStatus.WAITING
    definitions.set_enabled(rt, "down", enabled=False, reason="not this week", cancel_queued=True)
    assert _runs(rt)["p2"].status is RunStatus.CANCELLED
    assert _drain(rt) == ["p1"]  # the upstream's success releases nothing
    assert _runs(rt)["p2"].status is RunStatus.CANCELLED and _released(rt, down.id) == []


@pytest.mark.parametrize(("on_upstream", "status"), [("run", RunStatus.QUEUED), ("manual", RunStatus.MANUAL_REQUIRED),
                                                     ("skip", RunStatus.SKIPPED)])
def test_past_its_window_a_dependent_run_follows_on_upstream_with_one_alert(store_url: str, tmp_path: Path,
                                                                            on_upstream: str, status: RunStatus,
                                                                            runtime: RuntimeFactory) -> None:
    rt = _up_and_down(runtime, store_url, tmp_path, after_window="2h", on_upstream=on_upstream)
    down = _runs(rt)["p2"]
    definitions.set_enabled(rt, "up", enabled=False, reason="broken upstream")  # its run is held: never succeeds
    assert _drain(rt) == []
    rt.clock.set(T0 + timedelta(hours=2, minutes=59))
    reconciler.sweep(rt)
    assert _runs(rt)["p2"].status is RunStatus.WAITING  # within the window
    rt.clock.set(T0 + timedelta(hours=3, seconds=1))
    reconciler.sweep(rt)
    reconciler.sweep(rt)
    after = _runs(rt)["p2"]
    assert after.status is status and after.upstream_until is None
    assert after.reason == (None if status is RunStatus.QUEUED else "upstream")
    with rt.store.read() as conn:
        assert [e.event for e in outbox.list_events(conn) if e.run_id == down.id] == ["upstream_late"]
    if status is RunStatus.QUEUED:
        assert _drain(rt) == ["p2"]


def test_a_dependent_run_promoted_from_pending_waits_for_its_own_upstream_period(
        store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    up = dict(name="up", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC")
    down = dict(name="down", workflow="four_steps", project="p2", cron="0 * * * *", timezone="UTC", after=["up"])
    rt = runtime(store_url, schedules=[up, down], at=T0 + timedelta(minutes=30), workflows={"four_steps": FOUR_STEPS},
                 config={"testflow": {"log": str(tmp_path / "hourly.log")}}, apply=True)
    rt.clock.set(T0 + timedelta(hours=2, seconds=5))  # 11:00:05: the 10:00 and 11:00 slots of both
    tick.tick(rt)
    with rt.store.read() as conn:
        made = {(r.project, r.scheduled_for.hour): r for r in run_rows.list_runs(conn)}
    assert made[("p2", 10)].status is RunStatus.WAITING and made[("p2", 11)].status is RunStatus.PENDING
    _drain(rt)
    lines = (tmp_path / "hourly.log").read_text().splitlines()
    for hour in (10, 11):  # each dependent run started after its own upstream period succeeded
        up_done = max(n for n, line in enumerate(lines) if line.startswith(f"end {made[('p1', hour)].id} FOUR"))
        first = min(n for n, line in enumerate(lines) if line.startswith(f"start {made[('p2', hour)].id} "))
        assert first > up_done, hour
        assert _released(rt, made[("p2", hour)].id) == ["upstream_released"]
