"""One definition of "stalled" (RUNNING past max_runtime, lease alive) in runs list, its JSON, metrics and doctor."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.cli import render
from engine.core.clock import ManualClock
from engine.read import doctor, metrics, run_queries
from engine.runtime import Runtime
from engine.scheduling import definitions
from engine.store import claims, run_rows
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime, manual_run

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


def _running(rt: Runtime, key: str, *, claimed_at: datetime, lease_until: datetime) -> int:
    with rt.store.write() as conn:
        run_id = run_rows.insert_run(conn, manual_run(key, claimed_at))
        assert run_id is not None
        claim = claims.acquire_run(conn, worker_id=f"w-{key}", now=claimed_at, lease_until=lease_until,
                                   steps_by_workflow={"four_steps": FOUR_STEPS.step_names()}, projects=None,
                                   backfill_limit=1)
    assert claim is not None and claim.run.id == run_id
    return run_id


def test_stalled_means_the_same_everywhere(store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rt = make_runtime(store_url, clock=ManualClock(T0), registry={"four_steps": FOUR_STEPS})
    definitions.apply(rt)
    now = rt.clock.now()
    live = _running(rt, "live", claimed_at=now - timedelta(minutes=20), lease_until=now + timedelta(minutes=1))
    lost = _running(rt, "lost", claimed_at=now - timedelta(minutes=21), lease_until=now - timedelta(minutes=1))
    fresh = _running(rt, "fresh", claimed_at=now - timedelta(minutes=1), lease_until=now + timedelta(minutes=1))
    listed = run_queries.list_runs(rt, statuses=[], schedule=None, limit=0)
    render.runs(listed, now, as_json=True)
    flags = {row["id"]: row["stalled"] for row in json.loads(capsys.readouterr().out)}
    assert flags == {live: True, lost: False, fresh: False}
    render.runs(listed, now, as_json=False)
    table = capsys.readouterr().out
    marked = [line for line in table.splitlines() if "(stalled)" in line]
    assert len(marked) == 1 and "live" in marked[0]
    assert "reportflow_stalled_runs 1.0" in metrics.exposition(rt)
    problems = [f.message for f in doctor.check_runs(rt) if f.problem]
    assert len(problems) == 1 and f"run {live} " in problems[0]
