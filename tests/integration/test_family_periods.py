"""A family of runs is one period's run (SPEC §17 with §3.3-3.4, §12, §15.1, §4's limits), on SQLite and PostgreSQL.

A WAITING parent holds its schedule's slot as a RUNNING run would: the next
slots, misfired or on time, meet the overlap policy (a run PENDING behind it is
stuck behind it), ``backfill`` finds the period handled, and the calendar shows
the parent's status. Its children are the parent's part of the period, never runs
of the schedule of their own: they neither block the next slot nor stand for the
period; ``trigger`` and ``backfill`` re-queue them with their parent; they inherit
the parent's priority, so a backfill family's children count toward
``backfill_concurrency`` while the parent itself, holding no lease, does not.
In-process, with a manual clock.
"""

from __future__ import annotations

import warnings
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from engine.core.clock import ManualClock
from engine.core.models import PRIORITY, AttemptTrigger, RunStatus
from engine.execution import reconciler
from engine.execution.worker import Worker
from engine.operations import actions
from engine.plugins.workflow_registry import load_registry
from engine.read import calendar_view
from engine.scheduling import definitions, tick
from engine.store import instances, run_rows
from engine.store.tables import runs
from tests.flows.family import FAN_CHILD, FAN_PARENT
from tests.support import drain, make_runtime

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)
P = "2026-09-29T10:00Z"  # the period of the first scheduled slot after T0
KEY = f"fan_parent:p1:{P}"
DAY = date(2026, 9, 29)


def runtime(url: str, tmp_path: Path, *, overlap: str = "SKIP_NEW", misfire: str = "RUN_ONCE",
            worker: dict[str, Any] | None = None, **flow: object):  # type: ignore[no-untyped-def]
    settings = {"log": str(tmp_path / "family.log"), "fixed": str(tmp_path / "fixed"), "items": ["a", "b", "c"],
                **flow}
    spec = dict(name="fan", workflow="fan_parent", project="p1", cron="0 * * * *", timezone="UTC",
                misfire=misfire, overlap=overlap)
    rt = make_runtime(url, schedules=[spec], clock=ManualClock(T0),
                      registry={**load_registry(), "fan_parent": FAN_PARENT, "fan_child": FAN_CHILD},
                      extra={"familyflow": settings,
                             "worker": {"retry_backoff": "1m", "lease": "60s", **(worker or {})}})
    definitions.apply(rt)
    return rt


def waiting_parent(rt, worker: Worker) -> int:  # type: ignore[no-untyped-def]
    """Tick the 10:00 slot and run its parent's fan-out: the parent WAITING, its children QUEUED."""
    rt.clock.set(T0 + timedelta(hours=1, minutes=1))
    assert tick.tick(rt).created == {"QUEUED": 1}
    outcome = worker.run_one()
    assert outcome is not None and outcome.key == KEY and outcome.status is RunStatus.WAITING
    return outcome.run_id


def tick_at(rt, hour: int):  # type: ignore[no-untyped-def]
    rt.clock.set(T0.replace(hour=hour, minute=1))
    return tick.tick(rt)


def rows_of(rt) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    with rt.store.read() as conn:
        return {r.idempotency_key: r for r in conn.execute(select(runs).order_by(runs.c.id)).all()}


def children(rt) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {k.rpartition("/")[2]: r for k, r in rows_of(rt).items() if r.parent_id is not None}


def work_runs(tmp_path: Path) -> list[int]:
    """The run of each execution of a child's WORK step, in order."""
    log = tmp_path / "family.log"
    return [int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("work")]


# --- overlap (SPEC §3.4) ----------------------------------------------------------------------------------------

def test_skip_new_skips_the_next_slot_while_the_parent_waits(store_url: str, tmp_path: Path) -> None:
    rt = runtime(store_url, tmp_path, overlap="SKIP_NEW")
    worker = Worker(rt, "w1")
    waiting_parent(rt, worker)
    assert tick_at(rt, 11).created == {"SKIPPED": 1}  # as if the 10:00 run were RUNNING
    found = rows_of(rt)
    assert (found["fan_parent:p1:2026-09-29T11:00Z"].status, found["fan_parent:p1:2026-09-29T11:00Z"].reason) == \
        ("SKIPPED", "overlap")
    assert drain(worker) == [RunStatus.SUCCESS] * 4  # the three children, then the fan-in
    assert tick_at(rt, 12).created == {"QUEUED": 1}  # the family ended: the schedule's slot is free again


def test_queue_new_waits_behind_the_family_and_is_promoted_when_the_parent_ends(store_url: str,
                                                                                tmp_path: Path) -> None:
    rt = runtime(store_url, tmp_path, overlap="QUEUE_NEW")
    worker = Worker(rt, "w1")
    parent_id = waiting_parent(rt, worker)
    assert tick_at(rt, 11).created == {"PENDING": 1}
    next_key = "fan_parent:p1:2026-09-29T11:00Z"
    assert reconciler.sweep(rt).promoted == []  # a WAITING parent is a blocker, not a blocker gone (§5)
    assert [worker.run_one().status for _ in range(3)] == [RunStatus.SUCCESS] * 3  # type: ignore[union-attr]
    found = rows_of(rt)
    assert (found[KEY].status, found[next_key].status) == ("QUEUED", "PENDING")  # the fan-in is still to run
    outcome = worker.run_one()
    assert outcome is not None and (outcome.run_id, outcome.status) == (parent_id, RunStatus.SUCCESS)
    assert rows_of(rt)[next_key].status == "QUEUED"  # promoted by the parent's finish, not by a child's
    assert drain(worker) == [RunStatus.WAITING, *[RunStatus.SUCCESS] * 4]  # the 11:00 family, one after the other


@pytest.mark.parametrize(("misfire", "overlap", "statuses"), [
    ("RUN_ONCE", "QUEUE_NEW", ["MISSED", "MISSED", "MISSED", "PENDING"]),  # the latest slot, queued behind P
    ("CATCH_UP_ALL", "BUFFER_ONE", ["PENDING", "SKIPPED", "SKIPPED", "SKIPPED"]),  # one buffered behind P
])
def test_misfired_slots_after_a_waiting_parent_meet_its_overlap(store_url: str, tmp_path: Path, misfire: str,
                                                                 overlap: str, statuses: list[str]) -> None:
    rt = runtime(store_url, tmp_path, misfire=misfire, overlap=overlap)
    waiting_parent(rt, Worker(rt, "w1"))
    tick_at(rt, 14)  # the scheduler was silent: 11:00 .. 13:00 misfired, 14:00 on time
    found = rows_of(rt)
    assert [found[f"fan_parent:p1:2026-09-29T{h}:00Z"].status for h in (11, 12, 13, 14)] == statuses
    assert found[KEY].status == "WAITING"


def test_a_run_pending_behind_a_waiting_parent_is_stuck_behind_it(store_url: str, tmp_path: Path) -> None:
    rt = runtime(store_url, tmp_path, overlap="QUEUE_NEW")
    parent_id = waiting_parent(rt, Worker(rt, "w1"))
    assert tick_at(rt, 11).created == {"PENDING": 1}
    rt.clock.set(T0.replace(hour=11, minute=40))  # past stuck_after (30 min); a worker is alive all along
    with rt.store.write() as conn:
        instances.beat(conn, instance_id="w:1", role="worker", host="h", pid=1, projects=None, now=rt.clock.now())
    pending = [s for s in reconciler.find_stuck(rt, rt.clock.now()) if s.status == "PENDING"]
    assert [(s.key, s.reason) for s in pending] == [("fan_parent:p1:2026-09-29T11:00Z",
                                                     f"waits behind run {parent_id}")]


def test_children_left_running_by_a_cancelled_parent_do_not_hold_the_schedules_slot(store_url: str,
                                                                                  tmp_path: Path) -> None:
    rt = runtime(store_url, tmp_path, overlap="SKIP_NEW")
    worker = Worker(rt, "w1")
    parent_id = waiting_parent(rt, worker)
    claim = Worker(rt, "w2").claim()  # child a, RUNNING: it stops at its next boundary
    assert claim is not None and claim.run.parent_id == parent_id
    actions.cancel(rt, parent_id)
    assert children(rt)["a"].status == "RUNNING" and children(rt)["a"].trigger_type == "SCHEDULED"
    assert tick_at(rt, 11).created == {"QUEUED": 1}  # a child is not a scheduled run of the schedule
    schedule_id = rows_of(rt)[KEY].schedule_id
    with rt.store.read() as conn:
        assert run_rows.overlap_counts_of(conn, [schedule_id]) == {schedule_id: (1, 0)}  # the 11:00 run alone


# --- backfill (SPEC §12) ----------------------------------------------------------------------------------------

def test_backfill_finds_a_waiting_parents_period_handled(store_url: str, tmp_path: Path) -> None:
    rt = runtime(store_url, tmp_path, fail=["b"])
    worker = Worker(rt, "w1")
    parent_id = waiting_parent(rt, worker)
    before = rows_of(rt)
    report = actions.backfill(rt, "fan", first=DAY, last=DAY)
    assert report.present == [P] and report.left == [] and report.requeued == []
    assert report.created == [f"2026-09-29T{h:02}:00Z" for h in range(10)]  # the day's earlier slots
    assert len(report.future) == 13
    after = rows_of(rt)
    for key, row in before.items():  # the family as it was: no second run, no child re-queued
        assert (after[key].id, after[key].status, after[key].attempt_count) == (row.id, row.status, row.attempt_count)
    period_rows = [r for r in after.values() if r.business_key == P and r.parent_id is None]
    assert [(r.id, r.trigger_type) for r in period_rows] == [(parent_id, "SCHEDULED")]

    # Finished, the period is the parent's PARTIAL_SUCCESS (left as it is), not its FAILED or SUCCESS children.
    # (The family's runs outrank the backfilled ones: its children, then its fan-in, come first.)
    assert [worker.run_one().status for _ in range(4)] == [  # type: ignore[union-attr]
        RunStatus.SUCCESS, RunStatus.FAILED, RunStatus.SUCCESS, RunStatus.PARTIAL_SUCCESS]
    assert children(rt)["b"].status == "FAILED"
    report = actions.backfill(rt, "fan", first=DAY, last=DAY)
    assert report.left == [(P, "PARTIAL_SUCCESS")] and report.created == [] and report.requeued == []
    assert children(rt)["b"].status == "FAILED"


def test_backfill_of_a_cancelled_family_reruns_the_children_that_did_not_succeed(store_url: str,
                                                                              tmp_path: Path) -> None:
    rt = runtime(store_url, tmp_path)
    worker = Worker(rt, "w1")
    parent_id = waiting_parent(rt, worker)
    assert worker.run_one().status is RunStatus.SUCCESS  # type: ignore[union-attr]  # child a
    actions.cancel(rt, parent_id)
    assert {n: c.status for n, c in children(rt).items()} == {"a": "SUCCESS", "b": "CANCELLED", "c": "CANCELLED"}

    report = actions.backfill(rt, "fan", first=DAY, last=DAY)
    assert P in report.requeued
    found, kids = rows_of(rt), children(rt)
    assert found[KEY].status == "WAITING"  # it waits for its re-queued children, then runs its fan-in
    assert {n: c.status for n, c in kids.items()} == {"a": "SUCCESS", "b": "QUEUED", "c": "QUEUED"}
    backfill = PRIORITY[AttemptTrigger.BACKFILL]
    assert found[KEY].priority == backfill and {kids["b"].priority, kids["c"].priority} == {backfill}
    worker = Worker(rt, "w1")
    drain(worker)
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, parent_id)
    assert run.status is RunStatus.SUCCESS and run.error_code is None
    assert run.steps[1].output == {"done": {"a": 2, "b": 4, "c": 6}, "missing": {}}
    mine = {c.id: n for n, c in kids.items()}
    assert sorted(mine[run_id] for run_id in work_runs(tmp_path) if run_id in mine) == ["a", "b", "c"]  # a ran once


def test_trigger_of_a_partial_family_reruns_its_failed_child(store_url: str, tmp_path: Path) -> None:
    rt = runtime(store_url, tmp_path, fail=["b"])
    worker = Worker(rt, "w1")
    parent_id = waiting_parent(rt, worker)
    assert drain(worker)[-1] is RunStatus.PARTIAL_SUCCESS
    (tmp_path / "fixed").write_text("")  # the cause is gone; the operator asks for the period again
    result = actions.trigger(rt, "fan")
    assert (result.run_id, result.status) == (parent_id, "WAITING")
    assert {n: c.status for n, c in children(rt).items()} == {"a": "SUCCESS", "b": "QUEUED", "c": "SUCCESS"}
    assert drain(worker) == [RunStatus.SUCCESS, RunStatus.SUCCESS]  # child b, then the fan-in
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, parent_id)
    assert run.status is RunStatus.SUCCESS
    assert run.steps[1].output == {"done": {"a": 2, "b": 4, "c": 6}, "missing": {}}


# --- the calendar (engine.read.calendar_view, the web page's) ----------------------------------------------------------

def test_the_calendar_shows_the_parents_status_for_its_period(store_url: str, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from engine.web.app import create_app

    rt = runtime(store_url, tmp_path, fail=["c"])  # the last child by key fails
    worker = Worker(rt, "w1")
    parent_id = waiting_parent(rt, worker)
    tick_at(rt, 11)  # a later period in the range (SKIPPED by overlap): P is not the range's last key

    def cell_of(key: str) -> calendar_view.Cell:
        return next(c for c in calendar_view.calendar(rt, "fan", weeks=1).cells if c.key == key)

    assert (cell_of(P).state, cell_of(P).run_id) == ("WAITING", parent_id)
    assert cell_of("2026-09-29T11:00Z").state == "SKIPPED"
    assert drain(worker) == [RunStatus.SUCCESS, RunStatus.SUCCESS, RunStatus.FAILED, RunStatus.PARTIAL_SUCCESS]
    cell = cell_of(P)
    assert (cell.state, cell.run_id, cell.reason) == ("PARTIAL_SUCCESS", parent_id, "CHILDREN_FAILED")
    assert not cell.backfillable
    page = TestClient(create_app(rt, token=None), base_url="http://127.0.0.1").get("/schedules/fan").text
    assert page.count(f'data-key="{P}"') == 1  # one cell for the period, the parent's; no child has one
    assert f'href="/runs/{parent_id}" title="{P} — PARTIAL_SUCCESS (CHILDREN_FAILED)"' in page


# --- limits (SPEC §4, §17: children inherit the parent's priority and count toward its limits) -------------------

def test_a_backfill_familys_children_count_toward_backfill_concurrency(store_url: str, tmp_path: Path) -> None:
    rt = runtime(store_url, tmp_path, items=["a", "b"], worker={"backfill_concurrency": 1})
    rt.clock.set(T0.replace(hour=1, minute=30))
    report = actions.backfill(rt, "fan", first=DAY, last=DAY)
    assert report.created == ["2026-09-29T00:00Z", "2026-09-29T01:00Z"]
    first = Worker(rt, "w1").run_one()
    assert first is not None and first.status is RunStatus.WAITING and first.key.endswith("T00:00Z")
    # The WAITING parent holds no lease and no slot of the limit: its child is claimable ...
    claim = Worker(rt, "w2").claim()
    assert claim is not None and claim.run.idempotency_key == f"{first.key}/a"
    assert claim.run.priority == PRIORITY[AttemptTrigger.BACKFILL]
    # ... and, RUNNING, it takes the one backfill slot: neither its sibling nor the other period's parent starts.
    assert Worker(rt, "w3").claim() is None
    assert Worker(rt, "w2").execute(claim).status is RunStatus.SUCCESS
    assert drain(Worker(rt, "w3")) == [RunStatus.SUCCESS, RunStatus.SUCCESS,  # the sibling, then the fan-in
                                       RunStatus.WAITING, RunStatus.SUCCESS, RunStatus.SUCCESS, RunStatus.SUCCESS]


def test_the_kill_switch_holds_a_waiting_familys_children_and_cancel_queued_cancels_them(
        store_url: str, tmp_path: Path) -> None:
    """§15.3 on a family: disabling the schedule holds the children that have not started (no claim, ``held``
    shown); ``enable`` releases them; ``--cancel-queued`` cancels them instead."""
    rt = runtime(store_url, tmp_path)
    worker = Worker(rt, "w")
    parent = waiting_parent(rt, worker)
    definitions.set_enabled(rt, "fan", enabled=False, reason="incident")
    assert worker.run_one() is None, "a held child was claimed"
    with rt.store.read() as conn:
        held = [run_rows.get_run(conn, r.id, detail=False) for r in children(rt).values()]
    assert [r.held for r in held] == ["schedule disabled"] * 3, [(r.status, r.held) for r in held]
    definitions.set_enabled(rt, "fan", enabled=True, reason=None)
    assert worker.run_one() is not None  # released: the first child runs
    definitions.set_enabled(rt, "fan", enabled=False, reason="incident", cancel_queued=True)
    statuses = sorted(r.status for r in children(rt).values())
    assert statuses == ["CANCELLED", "CANCELLED", "SUCCESS"], statuses
    assert rows_of(rt)[KEY].id == parent
