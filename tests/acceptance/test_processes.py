"""Real processes against real databases: ticks racing, workers killed, paused, stopped.

Crash tests SIGKILL a real ``reportflow work`` in the middle of a step; the
side-effect log written by the test workflow, not the engine's own records,
is the witness of what executed.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.engine.url import make_url

from engine.store.tables import attempts, runs, steps
from tests.acceptance import procs
from tests.support import connected, write_config

pytestmark = pytest.mark.slow
T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


def flow_config(tmp: Path, url: str, *, schedules: list[dict[str, object]], lease: str = "60s",
                worker: dict[str, object] | None = None, **flow: object) -> Path:
    sections = {"worker": {"lease": lease, "retry_backoff": "1s", "poll_interval": "0.2s", **(worker or {})},
                "testflow": {"log": str(tmp / "steps.log"), "gate": str(tmp / "gate"), **flow}}
    return write_config(tmp / "reportflow.toml", db_url=url, sections=sections, schedules=schedules)


def four(name: str = "four", project: str = "p1", cron: str = "0 * * * *") -> dict[str, object]:
    return dict(name=name, workflow="four_steps", project=project, cron=cron, timezone="UTC",
                misfire="CATCH_UP_ALL", overlap="ALLOW")


def log_lines(tmp: Path) -> list[list[str]]:
    path = tmp / "steps.log"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def sigterm_at_gate(proc: subprocess.Popen[str], tmp: Path, log_name: str) -> None:
    """SIGTERM a process whose step waits at the gate, open the gate: it must finish the step and exit 143
    (128 + SIGTERM, as a shell reports it: an interrupted pass, not a finished one)."""
    proc.send_signal(signal.SIGTERM)
    # The gate opens once the process has taken the signal in (a signal is asynchronous: opened at once, the
    # step could end and the next begin before the process reads it), and it says so.
    procs.wait_for(lambda: "stop_requested" in (tmp / log_name).read_text(), what="the process to take SIGTERM in")
    (tmp / "gate").touch()
    assert procs.reap(proc) == 143, (tmp / log_name).read_text()


def db(url: str) -> Engine:
    return create_engine(url)


def test_eight_tick_processes_create_every_run_exactly_once(store_url: str, tmp_path: Path) -> None:
    schedules = [dict(name=f"s{i:03d}", workflow="echo", project=f"p{i:03d}", cron="*/15 * * * *",
                      timezone=["UTC", "Asia/Seoul", "America/New_York", "Europe/London"][i % 4],
                      misfire="CATCH_UP_ALL", overlap=["ALLOW", "QUEUE_NEW", "SKIP_NEW", "BUFFER_ONE"][i % 4])
                 for i in range(200)]
    config = write_config(tmp_path / "reportflow.toml", db_url=store_url, schedules=schedules)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now="2026-09-29T00:00:00Z"))
    later = "2026-09-29T12:00:00Z"  # 48 slots per schedule are due: 9,600 inserts raced by 8 processes
    ticks = [procs.spawn(tmp_path, config, "tick", now=later) for _ in range(8)]
    for proc in ticks:
        out, err = procs.finish(proc, timeout=300)
        assert proc.returncode == 0, err
    with connected(store_url) as conn:
        total = conn.execute(select(func.count()).select_from(runs)).scalar_one()
        distinct = conn.execute(select(func.count()).select_from(
            select(runs.c.schedule_id, runs.c.scheduled_for).distinct().subquery())).scalar_one()
        per_schedule = conn.execute(select(runs.c.schedule_id, func.count()).group_by(runs.c.schedule_id)).all()
    assert total == distinct == 200 * 48
    assert {count for _, count in per_schedule} == {48}


# A kill mid TWO (after a success) and mid FOUR (the optional last step) by default; ONE and THREE with --long.
@pytest.mark.parametrize("step", [pytest.param("ONE", marks=pytest.mark.long), "TWO",
                                  pytest.param("THREE", marks=pytest.mark.long), "FOUR"])
def test_sigkill_mid_step_then_recovery_resumes_without_rerunning_success(sqlite_url: str, tmp_path: Path,
                                                                          step: str) -> None:
    config = flow_config(tmp_path, sqlite_url, schedules=[four()], block_on=[step])
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    procs.ok(procs.run(tmp_path, config, "tick", now=clock.at(60)))
    worker = procs.spawn(tmp_path, config, "work", "--until-idle", "--worker-id", "doomed", now=clock.at(60))
    procs.wait_for(lambda: any(line[:3] == ["start", "1", step] for line in log_lines(tmp_path)),
                   what=f"the worker to enter {step}")
    procs.kill9(worker)
    # Nothing to recover while the lease lives; after it has expired the reconciler queues a recovery.
    procs.ok(procs.run(tmp_path, config, "reconcile", now=clock.at(60)))
    with connected(sqlite_url) as conn:
        assert conn.execute(select(runs.c.status)).scalar_one() == "RUNNING"
    procs.ok(procs.run(tmp_path, config, "reconcile", now=clock.at(200)))
    with connected(sqlite_url) as conn:
        assert conn.execute(select(runs.c.status)).scalar_one() == "RETRY_PENDING"
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(201)))
    ends = Counter(line[2] for line in log_lines(tmp_path) if line[0] == "end")
    assert ends == {"ONE": 1, "TWO": 1, "THREE": 1, "FOUR": 1}
    starts = Counter(line[2] for line in log_lines(tmp_path) if line[0] == "start")
    order = ["ONE", "TWO", "THREE", "FOUR"]
    assert starts[step] == 2  # the interrupted step ran again...
    assert all(starts[s] == 1 for s in order if s != step)  # ...and no other
    with connected(sqlite_url) as conn:
        assert conn.execute(select(runs.c.status)).scalar_one() == "SUCCESS"
        rows = conn.execute(select(attempts.c.trigger, attempts.c.from_step, attempts.c.outcome)
                            .order_by(attempts.c.number)).all()
    assert [tuple(r) for r in rows] == [("scheduled", "ONE", "lost"), ("recovery", step, "success")]


def test_sigkill_then_reconcile_shows_a_pending_recovery_attempt_at_once(store_url: str, tmp_path: Path) -> None:
    config = flow_config(tmp_path, store_url, schedules=[four()], block_on=["TWO"])
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    procs.ok(procs.run(tmp_path, config, "tick", now=clock.at(60)))
    worker = procs.spawn(tmp_path, config, "work", "--until-idle", "--worker-id", "doomed", now=clock.at(60))
    procs.wait_for(lambda: any(line[:3] == ["start", "1", "TWO"] for line in log_lines(tmp_path)),
                   what="the worker to enter TWO")
    procs.kill9(worker)
    procs.ok(procs.run(tmp_path, config, "reconcile", now=clock.at(200)))
    listed = procs.run(tmp_path, config, "runs", "list", "--json", now=clock.at(201))
    procs.ok(listed)
    (run,) = json.loads(listed.stdout)
    shown = procs.run(tmp_path, config, "runs", "show", str(run["id"]), "--json", now=clock.at(201))
    procs.ok(shown)
    detail = json.loads(shown.stdout)
    assert detail["status"] == "RETRY_PENDING"
    assert [(a["number"], a["trigger"], a["from_step"], a["outcome"]) for a in detail["attempts"]] == [
        (1, "scheduled", "ONE", "lost"), (2, "recovery", "TWO", "pending")]
    assert detail["attempts"][1]["started_at"] is None and detail["attempts"][1]["worker_id"] is None
    table = procs.run(tmp_path, config, "runs", "show", str(run["id"]), now=clock.at(201))
    procs.ok(table)
    assert "recovery" in table.stdout and "pending" in table.stdout
    # The worker that claims the run continues that attempt instead of adding a third.
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", "--worker-id", "rescuer", now=clock.at(202)))
    after = json.loads(procs.run(tmp_path, config, "runs", "show", str(run["id"]), "--json",
                                 now=clock.at(203)).stdout)
    assert after["status"] == "SUCCESS"
    assert [(a["number"], a["trigger"], a["outcome"], a["worker_id"]) for a in after["attempts"]] == [
        (1, "scheduled", "lost", "doomed"), (2, "recovery", "success", "rescuer")]


def test_paused_worker_cannot_write_after_its_lease_passed(store_url: str, tmp_path: Path) -> None:
    config = flow_config(tmp_path, store_url, schedules=[four()], block_on=["TWO"])
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    procs.ok(procs.run(tmp_path, config, "tick", now=clock.at(60)))
    paused = procs.spawn(tmp_path, config, "work", "--until-idle", "--worker-id", "paused", now=clock.at(60))
    procs.wait_for(lambda: any(line[:3] == ["start", "1", "TWO"] for line in log_lines(tmp_path)),
                   what="the first worker to enter TWO")
    paused.send_signal(signal.SIGSTOP)
    try:
        procs.ok(procs.run(tmp_path, config, "reconcile", now=clock.at(200)))
        procs.ok(procs.run(tmp_path, config, "work", "--until-idle", "--worker-id", "rescuer", now=clock.at(201)))
        (tmp_path / "gate").touch()
    finally:
        paused.send_signal(signal.SIGCONT)
    paused.communicate(timeout=120)
    assert paused.returncode == 0
    pids = {line[3] for line in log_lines(tmp_path) if line[0] == "start" and line[2] == "THREE"}
    assert len(pids) == 1
    (rescuer_pid,) = pids
    assert not any(line[0] == "end" and line[2] != "ONE" and line[3] == str(paused.pid)
                   for line in log_lines(tmp_path))
    with connected(store_url) as conn:
        assert conn.execute(select(runs.c.status)).scalar_one() == "SUCCESS"
        outputs = dict(conn.execute(select(steps.c.name, steps.c.output)).all())
    assert outputs["ONE"]["pid"] == paused.pid
    assert {outputs[s]["pid"] for s in ("TWO", "THREE", "FOUR")} == {int(rescuer_pid)}


# One schedule by default (both workers finish runs of one schedule at once: the harder case); 200 with --long.
@pytest.mark.parametrize("shared", [pytest.param(False, marks=pytest.mark.long), True],
                         ids=["200-schedules", "one-schedule"])
def test_two_workers_never_execute_one_run_twice(store_url: str, tmp_path: Path, shared: bool) -> None:
    # One schedule: both workers finish runs of it at once (this once deadlocked on PostgreSQL).
    if shared:
        schedules = [four(name="f", project="p", cron="* * * * *") | {"allow_frequent": True}]
        apply_at, tick_at = "2026-09-29T05:40:00Z", "2026-09-29T09:00:30Z"  # 200 minute slots
    else:
        schedules = [four(name=f"f{i:03d}", project=f"p{i:03d}") for i in range(200)]
        apply_at, tick_at = "2026-09-29T08:30:00Z", "2026-09-29T09:01:00Z"
    # Every run's ONE waits at the gate: each worker holds a run of its own before any run can finish,
    # so both take part whatever the timing; the gate opens once both are in.
    config = flow_config(tmp_path, store_url, schedules=schedules, block_on=["ONE"])
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=apply_at))
    procs.ok(procs.run(tmp_path, config, "tick", now=tick_at))
    workers = [procs.spawn(tmp_path, config, "work", "--until-idle", "--worker-id", f"w{i}",
                           now="2026-09-29T09:02:00Z") for i in range(2)]
    procs.wait_for(lambda: len({line[3] for line in log_lines(tmp_path) if line[0] == "start"}) == 2,
                   timeout=120, what="both workers to hold a run at the gate")
    (tmp_path / "gate").touch()
    for proc in workers:
        _, err = procs.finish(proc, timeout=600)
        assert proc.returncode == 0, err
    lines = log_lines(tmp_path)
    ends = Counter((line[1], line[2]) for line in lines if line[0] == "end")
    assert len(ends) == 200 * 4 and set(ends.values()) == {1}
    starts = Counter((line[1], line[2]) for line in lines if line[0] == "start")
    assert set(starts.values()) == {1}
    by_run: dict[str, set[str]] = defaultdict(set)
    for line in lines:
        by_run[line[1]].add(line[3])
    assert all(len(pids) == 1 for pids in by_run.values())  # one process executed each run
    assert len({pid for pids in by_run.values() for pid in pids}) == 2  # and both processes worked (the gate)
    with connected(store_url) as conn:
        statuses = Counter(conn.execute(select(runs.c.status)).scalars())
    assert statuses == {"SUCCESS": 200}


def test_serve_executes_a_due_run_and_stops_cleanly_on_sigterm(sqlite_url: str, tmp_path: Path) -> None:
    config = flow_config(tmp_path, sqlite_url, schedules=[four(cron="* * * * *") | {"allow_frequent": True}],
                         block_on=["TWO"], block_attempt=2)
    # apply at a fixed instant, and serve's clock anchored as it starts: however long apply takes under
    # load, serve starts one simulated second before the T0 slot (not past it, waiting for the next).
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=(T0 - timedelta(seconds=2)).isoformat()))
    clock = procs.Shared(T0)
    server = procs.spawn(tmp_path, config, "serve", "--worker-id", "srv", now=clock.at(-1), log_name="serve.log")
    try:
        procs.wait_for(lambda: sum(1 for line in log_lines(tmp_path) if line[:3] == ["end", "1", "FOUR"]) == 1,
                       what="the 09:00 run to finish")
    finally:
        server.send_signal(signal.SIGTERM)
        procs.reap(server)
    assert server.returncode == 143, (tmp_path / "serve.log").read_text()
    with connected(sqlite_url) as conn:
        first = conn.execute(select(runs.c.status, runs.c.started_at, runs.c.scheduled_for)
                             .where(runs.c.id == 1)).one()
    assert first.status == "SUCCESS"
    assert "serve_stopped" in (tmp_path / "serve.log").read_text()


def test_sigterm_mid_step_finishes_the_step_and_hands_the_run_back(sqlite_url: str, tmp_path: Path) -> None:
    config = flow_config(tmp_path, sqlite_url, schedules=[four()], block_on=["TWO"])
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    procs.ok(procs.run(tmp_path, config, "tick", now=clock.at(60)))
    worker = procs.spawn(tmp_path, config, "work", now=clock.at(60), log_name="work.log")
    procs.wait_for(lambda: any(line[:3] == ["start", "1", "TWO"] for line in log_lines(tmp_path)),
                   what="the worker to enter TWO")
    sigterm_at_gate(worker, tmp_path, "work.log")
    with connected(sqlite_url) as conn:
        run = conn.execute(select(runs.c.status, runs.c.lease_owner)).one()
        done = dict(conn.execute(select(steps.c.name, steps.c.status)).all())
    assert run.status == "QUEUED" and run.lease_owner is None
    assert done == {"ONE": "SUCCESS", "TWO": "SUCCESS", "THREE": "PENDING", "FOUR": "PENDING"}
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(70)))
    ends = Counter(line[2] for line in log_lines(tmp_path) if line[0] == "end")
    assert ends == {"ONE": 1, "TWO": 1, "THREE": 1, "FOUR": 1}


@pytest.mark.parametrize("concurrency", [1, 2])
def test_sigterm_mid_step_stops_serve_after_the_step_and_hands_the_run_back(sqlite_url: str, tmp_path: Path,
                                                                            concurrency: int) -> None:
    """serve's worker threads run beside its loop: SIGTERM still lets the step finish, hands the run back, exits 0."""
    config = flow_config(tmp_path, sqlite_url, schedules=[four(cron="* * * * *") | {"allow_frequent": True}],
                         block_on=["TWO"], worker={"concurrency": concurrency})
    # apply at a fixed instant, serve's clock anchored as it starts (see the test above)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=(T0 - timedelta(seconds=2)).isoformat()))
    clock = procs.Shared(T0)
    server = procs.spawn(tmp_path, config, "serve", "--worker-id", "srv", now=clock.at(-1), log_name="serve.log")
    try:
        procs.wait_for(lambda: any(line[:3] == ["start", "1", "TWO"] for line in log_lines(tmp_path)),
                       what="serve to enter TWO")
        sigterm_at_gate(server, tmp_path, "serve.log")
        # Issue 43, item 8: serve says at start what it serves and when the next slot is due.
        started = next(line for line in (tmp_path / "serve.log").read_text().splitlines() if "serve_started" in line)
        assert "schedules=1" in started and "next=" in started and "(four)" in started, started
    finally:
        if server.poll() is None:
            procs.kill9(server)
    with connected(sqlite_url) as conn:
        run = conn.execute(select(runs.c.status, runs.c.lease_owner).where(runs.c.id == 1)).one()
        done = dict(conn.execute(select(steps.c.name, steps.c.status).where(steps.c.run_id == 1)).all())
        outcomes = conn.execute(select(attempts.c.outcome).where(attempts.c.run_id == 1)).scalars().all()
    assert run.status == "QUEUED" and run.lease_owner is None
    assert done == {"ONE": "SUCCESS", "TWO": "SUCCESS", "THREE": "PENDING", "FOUR": "PENDING"}
    assert outcomes == ["released"]
    assert "serve_stopped" in (tmp_path / "serve.log").read_text()


def test_concurrent_schedule_edits_one_wins_the_other_exits_3(store_url: str, tmp_path: Path) -> None:
    """Two edits of version 1 at once: one lands, the other is refused (exit 3) and changes nothing.

    PostgreSQL: a share lock on the row is the barrier. Both edits read version 1
    (reads pass it) and wait at their UPDATE until both are waiting: only the
    version check in the UPDATE can tell the second it lost. SQLite serialises
    writers (BEGIN IMMEDIATE): both wait at the write lock the test holds, then
    go one after the other, and the second reads the first's version.
    """
    config = write_config(tmp_path / "reportflow.toml", db_url=store_url,
                          schedules=[dict(name="e", workflow="echo", project="p", cron="0 * * * *", timezone="UTC")])
    procs.ok(procs.run(tmp_path, config, "schedules", "apply"))
    crons = ("0 */2 * * *", "0 */3 * * *")
    with barrier(store_url) as wait_for_both:
        edits = [procs.spawn(tmp_path, config, "schedules", "set", "e", "--cron", cron, "--expect-version", "1")
                 for cron in crons]
        wait_for_both(edits)
    codes = [procs.reap(p, 120) for p in edits]
    assert sorted(codes) == [0, 3], [procs.finish(p) for p in edits]
    loser = edits[codes.index(3)]
    assert "version" in procs.finish(loser)[1]
    shown = procs.run(tmp_path, config, "schedules", "show", "e", "--json")
    procs.ok(shown)
    data = json.loads(shown.stdout)
    assert data["version"] == 2 and data["cron"] == crons[codes.index(0)]
    history = json.loads(procs.run(tmp_path, config, "schedules", "history", "e", "--json").stdout)
    assert [e["action"] for e in history] == ["create", "set"]


@contextmanager
def barrier(url: str) -> Iterator[Callable[[list[subprocess.Popen[str]]], None]]:
    """Hold the schedules back from writers; the callable waits until the given processes are blocked on it."""
    if url.startswith("sqlite"):
        path = str(Path(make_url(url).database or "").resolve())
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # readers pass, writers wait (30 s busy timeout)
        try:
            yield lambda edits: procs.wait_for(lambda: all(opened(p.pid, path) for p in edits), timeout=60,
                                               what="both edits to have opened the database")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    engine = create_engine(url)
    watcher = create_engine(url, isolation_level="AUTOCOMMIT")  # a fresh statistics snapshot for every look
    blocked = text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                   " AND wait_event_type = 'Lock' AND query LIKE 'UPDATE schedules%'")

    def waiting() -> int:
        with watcher.connect() as look:
            return int(look.execute(blocked).scalar_one())

    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT id FROM schedules FOR SHARE"))
            yield lambda edits: procs.wait_for(lambda: waiting() == len(edits), timeout=120,
                                               what="both edits to have read version 1 and to wait at their UPDATE")
            conn.rollback()
    finally:
        engine.dispose()
        watcher.dispose()


def opened(pid: int, path: str) -> bool:
    """Whether process ``pid`` has ``path`` open (read from /proc)."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.path.realpath(fd) == path for fd in fds.iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return False
