"""``reportflow work --concurrency 4``: real processes, SIGKILL during group commits, SIGTERM mid-step.

The side-effect log written by the test workflow (a line per step start and
end, fsync'd) is the witness of what executed, not the engine's records.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from engine.store.tables import runs, steps
from tests.acceptance import procs
from tests.acceptance.test_processes import flow_config, four, log_lines, sigterm_at_gate
from tests.support import connected

pytestmark = pytest.mark.slow
T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)
RUNS = 40


def many(count: int) -> list[dict[str, object]]:
    return [four(name=f"f{i:03d}", project=f"p{i:03d}") for i in range(count)]


def step_rows(url: str) -> dict[tuple[str, str], str]:
    with connected(url) as conn:
        return {(str(r.run_id), r.name): r.status
                for r in conn.execute(select(steps.c.run_id, steps.c.name, steps.c.status))}


def test_sigkill_during_group_commits_then_recovery_runs_no_success_step_twice(sqlite_url: str,
                                                                               tmp_path: Path) -> None:
    config = flow_config(tmp_path, sqlite_url, schedules=many(RUNS))
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    procs.ok(procs.run(tmp_path, config, "tick", now=clock.at(60)))
    worker = procs.spawn(tmp_path, config, "work", "--until-idle", "--concurrency", "4", "--worker-id", "doomed",
                         now=clock.at(60))
    procs.wait_for(lambda: sum(line[0] == "end" for line in log_lines(tmp_path)) >= RUNS,
                   what="a quarter of the steps to end")
    procs.kill9(worker)
    # What was durable at the kill, and how often each step had started by then.
    durable = {key for key, status in step_rows(sqlite_url).items() if status == "SUCCESS"}
    started = Counter((line[1], line[2]) for line in log_lines(tmp_path) if line[0] == "start")
    assert durable and len(durable) < RUNS * 4  # killed in the middle of the work
    procs.ok(procs.run(tmp_path, config, "reconcile", now=clock.at(300)))
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", "--concurrency", "4", now=clock.at(301)))
    with connected(sqlite_url) as conn:
        assert Counter(conn.execute(select(runs.c.status)).scalars()) == {"SUCCESS": RUNS}
    lines = log_lines(tmp_path)
    starts = Counter((line[1], line[2]) for line in lines if line[0] == "start")
    ends = Counter((line[1], line[2]) for line in lines if line[0] == "end")
    assert len(ends) == RUNS * 4  # every step of every run completed
    rerun = {key for key in durable if starts[key] != started[key]}
    assert not rerun, f"steps recorded SUCCESS before the kill ran again: {sorted(rerun)}"


def test_sigterm_hands_back_every_run_in_flight_at_its_next_boundary(sqlite_url: str, tmp_path: Path) -> None:
    config = flow_config(tmp_path, sqlite_url, schedules=many(4), block_on=["TWO"])
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    procs.ok(procs.run(tmp_path, config, "tick", now=clock.at(60)))
    worker = procs.spawn(tmp_path, config, "work", "--concurrency", "4", now=clock.at(60), log_name="work.log")
    procs.wait_for(lambda: len({line[1] for line in log_lines(tmp_path) if line[:1] == ["start"]
                                and line[2] == "TWO"}) == 4, what="four runs to be inside TWO at once")
    sigterm_at_gate(worker, tmp_path, "work.log")
    with connected(sqlite_url) as conn:
        rows = conn.execute(select(runs.c.status, runs.c.lease_owner)).all()
    assert [tuple(r) for r in rows] == [("QUEUED", None)] * 4
    done = Counter((name, status) for (_, name), status in step_rows(sqlite_url).items())
    assert done == {("ONE", "SUCCESS"): 4, ("TWO", "SUCCESS"): 4, ("THREE", "PENDING"): 4, ("FOUR", "PENDING"): 4}
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", "--concurrency", "4", now=clock.at(70)))
    ends = Counter((line[1], line[2]) for line in log_lines(tmp_path) if line[0] == "end")
    assert len(ends) == 16 and set(ends.values()) == {1}
