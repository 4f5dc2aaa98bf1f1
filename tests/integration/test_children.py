"""Child runs (SPEC §17) in-process, on SQLite and PostgreSQL, with a manual clock.

A parent fans out into one child per item, WAITING with no lease while they work;
the last child's finish queues it again and its JOIN reads their outputs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Row, select, update

from engine.core import errors
from engine.core.models import RunStatus
from engine.execution import reconciler
from engine.execution.worker import Worker
from engine.operations import actions
from engine.runtime import Runtime
from engine.scheduling import tick
from engine.store import pruning, run_rows
from engine.store.tables import runs
from tests.flows.family import FAN_CHILD, FAN_PARENT
from tests.support import ManualRuntime, RuntimeFactory, drain

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


SPEC = dict(name="fan", workflow="fan_parent", project="p1", cron="0 * * * *", timezone="UTC",
            misfire="RUN_ONCE", overlap="SKIP_NEW")
FLOWS = {"fan_parent": FAN_PARENT, "fan_child": FAN_CHILD}


def config(tmp_path: Path, **flow: object) -> dict[str, Any]:
    """The family flow's settings (its log, gate, items, what fails) and a worker with a 60 s lease."""
    settings = {"log": str(tmp_path / "family.log"), "gate": str(tmp_path / "gate"),
                "fixed": str(tmp_path / "fixed"), "items": ["a", "b", "c"], **flow}
    return {"familyflow": settings, "worker": {"retry_backoff": "1m", "lease": "60s"}}


def queue_parent(rt: ManualRuntime) -> int:
    rt.clock.set(T0 + timedelta(hours=1, minutes=1))
    tick.tick(rt)
    with rt.store.read() as conn:
        (run,) = run_rows.list_runs(conn)
    return run.id


def rows_of(rt: Runtime) -> dict[str, Row[Any]]:
    with rt.store.read() as conn:
        return {r.idempotency_key: r for r in conn.execute(select(runs).order_by(runs.c.id)).all()}


def work_lines(tmp_path: Path) -> list[str]:
    log = tmp_path / "family.log"
    return [line.split()[2] for line in log.read_text().splitlines() if line.startswith("work")] if log.exists() else []


def test_parent_waits_without_a_lease_and_its_fan_in_reads_every_child(store_url: str, tmp_path: Path,
                                                                       runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    parent_id = queue_parent(rt)
    worker = Worker(rt, "w1")
    first = worker.run_one()
    assert first is not None and first.run_id == parent_id and first.status is RunStatus.WAITING
    found = rows_of(rt)
    parent = found[first.key]
    assert (parent.status, parent.lease_owner, parent.lease_until) == ("WAITING", None, None)
    children = {k: r for k, r in found.items() if r.parent_id == parent_id}
    assert sorted(children) == [f"{first.key}/a", f"{first.key}/b", f"{first.key}/c"]
    assert {r.status for r in children.values()} == {"QUEUED"}
    assert {r.project for r in children.values()} == {"p1"} and {r.schedule_id for r in children.values()} == {None}
    assert {r.priority for r in children.values()} == {parent.priority}
    assert worker.run_one().status is RunStatus.SUCCESS  # type: ignore[union-attr]  # child a
    assert rows_of(rt)[first.key].status == "WAITING"  # two children still to go: nobody may claim it
    assert drain(worker) == [RunStatus.SUCCESS, RunStatus.SUCCESS, RunStatus.SUCCESS]  # b, c, then the parent
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, parent_id)
    assert run.status is RunStatus.SUCCESS
    assert run.steps[1].output == {"done": {"a": 2, "b": 4, "c": 6}, "missing": {}}
    assert [a.trigger.value for a in run.attempts] == ["scheduled", "fan_in"]
    assert [a.outcome.value for a in run.attempts] == ["released", "success"]
    assert work_lines(tmp_path) == ["a", "b", "c"]


def test_a_failed_child_makes_the_parent_partial_and_retry_requeues_only_it(store_url: str, tmp_path: Path,
                                                                            runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path, fail=["b"]), apply=True)
    parent_id = queue_parent(rt)
    worker = Worker(rt, "w1")
    assert drain(worker) == [RunStatus.WAITING, RunStatus.SUCCESS, RunStatus.FAILED, RunStatus.SUCCESS,
                             RunStatus.PARTIAL_SUCCESS]
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, parent_id)
    assert run.status is RunStatus.PARTIAL_SUCCESS and run.error_code == "CHILDREN_FAILED"
    assert "/b (FAILED GIT_REPO_NOT_FOUND)" in (run.error_message or "")
    assert run.steps[1].output == {"done": {"a": 2, "c": 6}, "missing": {"b": "FAILED GIT_REPO_NOT_FOUND"}}

    (tmp_path / "fixed").write_text("")
    result = actions.retry(rt, parent_id)
    assert result.status == "WAITING"
    found = rows_of(rt)
    assert found[f"{run.idempotency_key}/b"].status == "QUEUED"
    assert found[f"{run.idempotency_key}/a"].status == "SUCCESS" and found[run.idempotency_key].status == "WAITING"
    assert drain(worker) == [RunStatus.SUCCESS, RunStatus.SUCCESS]  # child b, then the fan-in
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, parent_id)
    assert run.status is RunStatus.SUCCESS and run.error_code is None
    assert run.steps[0].attempts == 1  # the fan-out did not run again
    assert run.steps[1].output == {"done": {"a": 2, "b": 4, "c": 6}, "missing": {}}
    assert work_lines(tmp_path) == ["a", "b", "c", "b"]


def test_cancel_of_a_waiting_parent_cancels_its_unfinished_children(store_url: str, tmp_path: Path,
                                                                    runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    parent_id = queue_parent(rt)
    worker = Worker(rt, "w1")
    assert worker.run_one().status is RunStatus.WAITING  # type: ignore[union-attr]
    assert worker.run_one().status is RunStatus.SUCCESS  # type: ignore[union-attr]  # child a
    claim = Worker(rt, "w2").claim()  # child b, RUNNING
    assert claim is not None
    result = actions.cancel(rt, parent_id)
    assert result.status == "CANCELLED"
    by_child = {r.idempotency_key.rpartition("/")[2]: r for r in rows_of(rt).values() if r.parent_id}
    assert by_child["a"].status == "SUCCESS"
    assert by_child["b"].status == "RUNNING" and by_child["b"].cancel_requested  # stops at its next boundary
    assert by_child["c"].status == "CANCELLED"
    assert rows_of(rt)[by_child["a"].idempotency_key.rpartition("/")[0]].status == "CANCELLED"
    assert worker.run_one() is None  # nothing of the family is claimable any more


def test_prune_takes_a_family_together_and_never_a_child_alone(store_url: str, tmp_path: Path,
                                                               runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    parent_id = queue_parent(rt)
    drain(Worker(rt, "w1"))
    children = [r.id for r in rows_of(rt).values() if r.parent_id == parent_id]
    with rt.store.write() as conn:
        assert pruning.delete_runs(conn, children[:1]) == {}  # a child is never removed without its parent
    with rt.store.write() as conn:
        removed = pruning.delete_runs(conn, [parent_id])
    assert sorted(removed) == sorted([parent_id, *children])
    assert rows_of(rt) == {}


def test_reconciler_releases_a_waiting_parent_whose_children_all_finished(store_url: str, tmp_path: Path,
                                                                          runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    parent_id = queue_parent(rt)
    assert Worker(rt, "w1").run_one().status is RunStatus.WAITING  # type: ignore[union-attr]
    with rt.store.write() as conn:  # the children ended without releasing it (say, edited by hand)
        conn.execute(update(runs).where(runs.c.parent_id == parent_id).values(status="CANCELLED"))
    assert reconciler.sweep(rt).released == [parent_id]
    assert rows_of(rt)[next(k for k, r in rows_of(rt).items() if r.id == parent_id)].status == "QUEUED"
    assert reconciler.sweep(rt).released == []


def test_a_child_cannot_be_cancelled_into_a_stuck_parent(store_url: str, tmp_path: Path,
                                                         runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path, items=["a"]), apply=True)
    parent_id = queue_parent(rt)
    worker = Worker(rt, "w1")
    assert worker.run_one().status is RunStatus.WAITING  # type: ignore[union-attr]
    (child,) = [r for r in rows_of(rt).values() if r.parent_id == parent_id]
    actions.cancel(rt, child.id)
    assert [r.status for r in rows_of(rt).values() if r.id == parent_id] == ["QUEUED"]
    assert worker.run_one().status is RunStatus.PARTIAL_SUCCESS  # type: ignore[union-attr]
    with pytest.raises(errors.InvalidTransition):
        actions.cancel(rt, child.id)


def test_the_web_page_links_both_ways_and_folds_children_into_their_parent_row(sqlite_url: str,
                                                                              tmp_path: Path,
                                                                              runtime: RuntimeFactory) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from engine.web.app import create_app

    rt = runtime(sqlite_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path, fail=["b"]), apply=True)
    parent_id = queue_parent(rt)
    drain(Worker(rt, "w1"))
    children = sorted(r.id for r in rows_of(rt).values() if r.parent_id == parent_id)
    web = TestClient(create_app(rt, token=None), base_url="http://127.0.0.1")
    listing = web.get("/runs").text
    assert listing.count('href="/runs/') == 1 + len(children)  # one row, its children inside it
    assert "<details><summary>3 child runs:" in listing
    parent_page = web.get(f"/runs/{parent_id}").text
    assert "Child runs" in parent_page and all(f'href="/runs/{c}"' in parent_page for c in children)
    child_page = web.get(f"/runs/{children[1]}").text
    assert f'<a href="/runs/{parent_id}" rel="parent">' in child_page and "GIT_REPO_NOT_FOUND" in child_page


def test_metrics_count_children_under_their_parent_schedule(store_url: str, tmp_path: Path,
                                                            runtime: RuntimeFactory) -> None:
    from engine.read import metrics

    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    queue_parent(rt)
    assert Worker(rt, "w1").run_one().status is RunStatus.WAITING  # type: ignore[union-attr]
    with rt.store.read() as conn:
        snap = metrics.read_snapshot(conn, rt.clock.now())
    assert snap.runs[("fan", "SCHEDULED", "WAITING")] == 1
    assert snap.runs[("fan", "SCHEDULED", "QUEUED")] == 3
    assert not any(n for (schedule, _, _), n in snap.runs.items() if schedule == "")


def test_prune_of_a_finished_family_removes_parent_and_children(store_url: str, tmp_path: Path,
                                                                runtime: RuntimeFactory) -> None:
    from datetime import date

    from engine.operations import prune

    rt = runtime(store_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path), apply=True)
    queue_parent(rt)
    drain(Worker(rt, "w1"))
    assert len(rows_of(rt)) == 4
    rt.clock.set(T0 + timedelta(days=30))
    report = prune.prune(rt, date(2026, 10, 20))
    assert rows_of(rt) == {} and report.removed >= 1


def test_the_reconciler_reports_a_child_whose_parent_vanished(sqlite_url: str, tmp_path: Path,
                                                              runtime: RuntimeFactory) -> None:
    import sqlite3

    rt = runtime(sqlite_url, schedules=[SPEC], at=T0, workflows=FLOWS, config=config(tmp_path, items=["a"]), apply=True)
    parent_id = queue_parent(rt)
    assert Worker(rt, "w1").run_one().status is RunStatus.WAITING  # type: ignore[union-attr]
    raw = sqlite3.connect(str(tmp_path / "rf.db"))  # by hand, behind the engine's back (foreign keys off)
    with raw:
        for table in ("steps", "attempts", "artifacts", "audit_events"):
            raw.execute(f"DELETE FROM {table} WHERE run_id = ?", (parent_id,))
        raw.execute("DELETE FROM runs WHERE id = ?", (parent_id,))
    raw.close()
    report = reconciler.sweep(rt)
    assert [(c.parent_id, c.idempotency_key.rpartition("/")[2]) for c in report.orphans] == [(parent_id, "a")]
