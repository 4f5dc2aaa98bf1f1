"""PostgreSQL fails under running nodes: backends killed, the server crashed mid-step and mid-tick.

Each test owns a throwaway cluster (``initdb`` as the postgres user into a
temporary folder, its own port and socket folder, ``pg_ctl``; never the
machine's shared server; stopped in teardown). On it run two ``serve`` and two
``work`` processes (this branch has no ``work --concurrency``), each under a
supervisor that restarts it the way systemd would and records why it exited,
while ``*/5`` schedules have a backlog to work off on a shared ``--now T@E``
clock (and a slot falls due in real time, mid-test). Then:

- ``terminate``: every backend of the database killed with
  ``pg_terminate_backend`` at seeded random instants;
- ``restart``: the cluster stopped with ``-m immediate`` while steps run, and
  started again once every node has met the outage and failed a retry in it (exits or logged
  loop failures; 5-30 s with ``--long``), twice (four times);
- ``catchup``: the same while a tick is inserting a large catch-up (24
  schedules, two days due at once: ~11,700 rows).

Afterwards every ``serve`` is still the process it was, every ``work`` exit
was the one-line database error, the nodes work off everything on their own;
after SIGTERM, ``reconcile`` and ``work --until-idle``: every slot since the
schedules were applied is exactly one row (or in a ``too_old`` range), every
run is SUCCESS, and no step the database had shown SUCCESS started again (the
``four_steps`` side-effect log, read against an outside poller of the database).
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select, text

from engine.store.tables import artifacts, audit_events, runs, schedules
from tests.acceptance import procs
from tests.reliability import pgcluster
from tests.reliability.nodes import Node, SuccessWatch, slots_seen, step_executions
from tests.reliability.nodes import utc as _utc
from tests.support import write_config

pytestmark = pytest.mark.slow

APPLIED = datetime(2026, 6, 1, 0, 3, tzinfo=UTC)  # first slot 00:05; no DST change in June for these zones
FINAL = {"SUCCESS", "MISSED", "SKIPPED", "MANUAL_REQUIRED"}
DB_ERROR = re.compile(r"^error \[DATABASE_ERROR\]: database error: .+|^error.*cannot reach the database at .+")
LOOP_FAILED = re.compile(r"\b(serve|work)_loop_failed\b")  # a node that met a database failure and carries on


@pytest.fixture
def cluster() -> Iterator[pgcluster.Cluster]:
    bindir = pgcluster.find_bin()
    if bindir is None:
        message = "no /usr/lib/postgresql/*/bin/initdb: cannot make a throwaway PostgreSQL cluster"
        if pgcluster.IN_CI:
            pytest.fail(message + " (CI=true: these tests must run)")
        pytest.skip(message)
    made = pgcluster.Cluster(bindir)
    try:
        made.start()
        made.create_database()
        yield made
    finally:
        made.destroy()


def four(name: str, zone: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "workflow": "four_steps", "project": name, "cron": "*/5 * * * *", "timezone": zone,
            "misfire": "CATCH_UP_ALL", "overlap": "ALLOW", **extra}


def echo(name: str, zone: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "workflow": "echo", "project": name, "cron": "*/5 * * * *", "timezone": zone,
            "misfire": "CATCH_UP_ALL", "overlap": "QUEUE_NEW", **extra}


STEADY = [four("f-utc", "UTC"), four("f-seoul", "Asia/Seoul"), four("f-ny", "America/New_York"),
          four("f-sydney", "Australia/Sydney"), echo("e-berlin", "Europe/Berlin")]
CATCHUP = ([four(f"f-{n}", zone, catchup_window="3h") for n, zone in
            enumerate(("UTC", "Asia/Seoul", "America/New_York", "Europe/Berlin"))]
           + [echo(f"once-{n}", "Asia/Kolkata", misfire="RUN_ONCE") for n in range(10)]
           + [echo(f"manual-{n}", "America/Sao_Paulo", misfire="MANUAL") for n in range(10)])


class Fleet:
    """The cluster, the config, the four supervised nodes and the outside watchers of one test."""

    def __init__(self, cluster: pgcluster.Cluster, tmp: Path, specs: list[dict[str, Any]], backlog: timedelta) -> None:
        self.cluster = cluster
        self.tmp = tmp
        self.log = tmp / "steps.log"
        self.config = write_config(tmp / "reportflow.toml", db_url=cluster.url, schedules=specs,
                                   sections={"worker": {"lease": "60s", "poll_interval": "0.2s", "max_attempts": 10,
                                                        "retry_backoff": "1s"},
                                             "testflow": {"log": str(self.log), "sleep_ms": 15}})
        for args in (("db", "upgrade"), ("schedules", "apply")):
            done = procs.run(tmp, self.config, *args, now=procs.Shared(APPLIED).at())
            assert done.returncode == 0, done.stderr
        # 20 s short of a whole slot: a backlog is due at once, and one more slot falls due in real time.
        self.clock = procs.Shared(APPLIED + backlog - timedelta(seconds=20))
        self.admin = create_engine(cluster.admin_url, isolation_level="AUTOCOMMIT", pool_pre_ping=True,
                                   connect_args={"connect_timeout": 2})
        self.watch = SuccessWatch(cluster.url, self.log)
        self.nodes: list[Node] = []

    def start_nodes(self) -> None:
        now = self.clock.at()
        self.watch.start()
        self.nodes = [Node(f"serve{n}", self.tmp, self.config, now, ("serve", "--worker-id", f"serve{n}")).start()
                      for n in (1, 2)]
        self.nodes += [Node(f"work{n}", self.tmp, self.config, now, ("work", "--worker-id", f"work{n}")).start()
                       for n in (1, 2)]

    def scalar(self, sql: str) -> Any:
        with self.admin.connect() as conn:
            return conn.execute(text(sql)).scalar()

    def in_reportflow(self, sql: str) -> Any:
        engine = create_engine(self.cluster.url, connect_args={"connect_timeout": 2})
        try:
            with engine.connect() as conn:
                return conn.execute(text(sql)).scalar()
        finally:
            engine.dispose()

    def terminate_backends(self) -> int:
        return int(self.scalar("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE datname = 'reportflow' AND pid <> pg_backend_pid()"))

    def running(self) -> int:
        return int(self.in_reportflow("SELECT count(*) FROM runs WHERE status = 'RUNNING'"))

    def open_runs(self) -> int:
        return int(self.in_reportflow("SELECT count(*) FROM runs WHERE status IN "
                                      "('QUEUED', 'RUNNING', 'RETRY_PENDING', 'PENDING')"))

    def outage_marks(self) -> dict[str, int]:
        """How often each node has met a database failure so far: its exits and its logged loop failures."""
        return {node.name: len(node.exits) + len(LOOP_FAILED.findall(node.logs())) for node in self.nodes}

    def outage(self, before: dict[str, int], hold_s: float | None) -> float:
        """Keep the server down (it was just stopped): ``hold_s`` seconds (``--long``), or until every node has
        met the outage twice (exits or logged loop failures: its retry, too, found the server down);
        returns how long it was down after the stop."""
        began = time.monotonic()
        if hold_s is not None:
            time.sleep(hold_s)
        else:
            wait(lambda: all(self.outage_marks()[name] >= count + 2 for name, count in before.items()), 60,
                 "every node to meet the outage and fail a retry", 0.1)
        return time.monotonic() - began

    def close(self) -> None:
        for node in self.nodes:
            if node.alive():
                node.kill()
        self.admin.dispose()


def wait(predicate: Any, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except Exception:  # noqa: BLE001 - the database is still coming back
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# A restart by default (every connection lost, the server back): terminated backends and a catch-up after the
# outage with --long.
@pytest.mark.parametrize("fault", [pytest.param("terminate", marks=pytest.mark.long), "restart",
                                   pytest.param("catchup", marks=pytest.mark.long)])
def test_postgres_fails_under_running_nodes(cluster: pgcluster.Cluster, tmp_path: Path, fault: str, seed: int,
                                            long_run: bool) -> None:
    rng = random.Random(f"{seed}:pg-{fault}")
    began = time.monotonic()
    specs, backlog = (CATCHUP, timedelta(days=2 if long_run else 1)) if fault == "catchup" else (STEADY, timedelta(hours=12 if long_run else 4))
    fleet = Fleet(cluster, tmp_path, specs, backlog)
    context = f"seed {seed}, fault {fault}"
    injected: list[str] = []
    try:
        fleet.start_nodes()
        if fault == "catchup":
            # The instant a tick is inserting the catch-up (its transaction still open), crash the server.
            wait(lambda: fleet.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = 'reportflow' "
                                      "AND query ILIKE 'INSERT INTO runs%'") > 0, 120, "the catch-up tick", 0.005)
            rows_before = fleet.scalar("SELECT count(*) FROM pg_stat_activity")  # still up: the crash comes next
            felt = fleet.outage_marks()
            cluster.stop(immediate=True)
            down = fleet.outage(felt, rng.uniform(5, 30) if long_run else None)
            injected.append(f"stop -m immediate mid-tick ({rows_before} backends), down {down:.1f}s")
            cluster.start()
            wait(lambda: fleet.running() > 0, 180, "steps running again")
        else:
            wait(lambda: len(fleet.watch.first_success) >= 8, 180, "the first steps to succeed")
        if fault == "terminate":
            for _ in range(30 if long_run else 10):
                time.sleep(rng.uniform(0.3, 2.5))
                injected.append(f"terminated {fleet.terminate_backends()} backends")
        elif fault in ("restart", "catchup"):
            for _ in range((4 if long_run else 2) if fault == "restart" else (2 if long_run else 0)):
                time.sleep(rng.uniform(0.5, 3.0))
                wait(lambda: fleet.running() > 0, 60, "a step in flight")
                felt = fleet.outage_marks()
                cluster.stop(immediate=True)
                down = fleet.outage(felt, rng.uniform(5, 30) if long_run else None)
                injected.append(f"stop -m immediate with steps running, down {down:.1f}s")
                cluster.start()
        faults_done = time.monotonic()
        # The nodes must recover on their own: everything due is worked off without an operator.
        wait(lambda: fleet.open_runs() == 0, 300, f"{context}: the nodes to work off the backlog", 0.5)
        recovered_in = time.monotonic() - faults_done
        serves = [n for n in fleet.nodes if n.name.startswith("serve")]
        assert all(n.alive() for n in fleet.nodes), f"{context}: a node is down: {[n.name for n in fleet.nodes if not n.alive()]}"
        for node in serves:
            # A serve may fail its start-up checks while the server is down (and be restarted); once serving, never.
            assert not [ex for ex in node.exits if ex.served], f"{context}: {node.name} exited: {node.exits}"
        # None: the node was between an exit and its restart; that exit is judged below like the others.
        codes = {node.name: node.terminate() for node in fleet.nodes}
        for node in fleet.nodes:
            for ex in node.exits:
                assert ex.code == 1 and DB_ERROR.match(ex.last_line), (
                    f"{context}: {node.name} exited {ex.code} with {ex.last_line!r}\n{node.logs()[-3000:]}")
            code = codes[node.name]
            assert code in (143, None), f"{context}: {node.name} exited {code} on SIGTERM\n{node.logs()[-3000:]}"
    finally:
        fleet.watch.halt()
        fleet.close()

    later = fleet.clock.at(300)
    assert procs.run(tmp_path, fleet.config, "reconcile", now=later).returncode == 0
    drained = procs.run(tmp_path, fleet.config, "work", "--until-idle", now=later, timeout=600)
    assert drained.returncode == 0, drained.stderr[-3000:]
    fleet.watch.read_once()

    engine = create_engine(cluster.url)
    try:
        with engine.connect() as conn:
            sched = {row.id: row for row in conn.execute(select(schedules))}
            rows = conn.execute(select(runs.c.id, runs.c.schedule_id, runs.c.scheduled_for, runs.c.trigger_type,
                                       runs.c.revision, runs.c.status, runs.c.workflow)).all()
            marks = conn.execute(select(artifacts.c.run_id, artifacts.c.step)).all()
            too_old = conn.execute(select(audit_events.c.schedule_id, audit_events.c.after)
                                   .where(audit_events.c.action == "slots_too_old")).all()
            recovered = Counter(conn.execute(select(audit_events.c.reason)
                                             .where(audit_events.c.action == "run_recovered")).scalars())
    finally:
        engine.dispose()
    statuses = Counter(r.status for r in rows)
    context += f", {len(rows)} rows {dict(statuses)}, faults: {injected}"

    check_slots(sched, rows, too_old, context)
    # Every run a database error cut short was taken back by the process holding it (a restarted `work`
    # by its --worker-id, a `serve` on its next loop), none waited out its lease (60 s) behind a live node.
    assert not recovered["lease expired"], f"{context}: runs recovered only when their lease expired: {recovered}"
    assert set(statuses) <= FINAL, f"{context}: not every run finished"
    starts, ends = step_executions(fleet.log)
    violations = fleet.watch.violations()
    assert not violations, f"{context}: {violations[:5]}"
    executed = {r.id for r in rows if r.workflow == "four_steps" and r.status == "SUCCESS"}
    assert {run_id for run_id, step in ends if step == "FOUR"} == executed, f"{context}: a SUCCESS run never executed"
    doubled_marks = [k for k, n in Counter((m.run_id, m.step) for m in marks).items() if n > 1]
    assert not doubled_marks, f"{context}: a step's record made twice: {doubled_marks[:5]}"
    again = sum(1 for n in starts.values() if n > 1)
    restarts = sum(len(n.exits) for n in fleet.nodes)
    print(f"\npg-{fault}: {len(injected)} faults ({injected}), work restarts {restarts}, {len(rows)} rows "
          f"{dict(statuses)}, {len(executed)} four_steps runs; {again} steps started twice whose first "
          f"execution's SUCCESS never committed, 0 after SUCCESS; watcher reads {fleet.watch.reads} "
          f"(failed {fleet.watch.failed_reads}); recoveries {dict(recovered)}; nodes drained {recovered_in:.0f}s after the last fault; "
          f"{time.monotonic() - began:.0f}s; {context.split(',')[0]}")


def check_slots(sched: dict[int, Any], rows: Sequence[Any], too_old: Sequence[Any], context: str) -> None:
    """§10.1 and §10.2 from the outside: every 5-minute slot since APPLIED, once (zones with whole-hour offsets)."""
    ranges, have = slots_seen(rows, too_old, context)
    for schedule_id, schedule in sched.items():
        end = _utc(schedule.next_run_at)
        wanted, at = [], APPLIED.replace(minute=5)
        while at < end:
            wanted.append(at)
            at += timedelta(minutes=5)
        lost = [s for s in wanted if s not in have[schedule_id]
                and not any(lo <= s < hi for lo, hi in ranges[schedule_id])]
        assert not lost, f"{context}: {schedule.name} lost {len(lost)} slots, first {lost[:3]}"
        extra = sorted(have[schedule_id] - set(wanted))
        assert not extra, f"{context}: {schedule.name} has rows for slots not its own: {extra[:3]}"


def test_a_worker_whose_lease_ran_out_while_beats_could_not_land_makes_no_external_effect(store_url: str,
                                                                                          tmp_path: Path) -> None:
    """Regression (issue 15 item 4): the check before an external effect asked only whether the fencing
    token still owned the run, not whether its lease was still valid. A worker whose heartbeats could not
    reach the database (down) past its lease went on to its effect once the database answered again,
    although a reconciler was free to hand the run to another worker at that very moment.

    In-process, with a ManualClock: its heartbeat never lands (time does not pass by itself), as when
    every beat fails; the step waits on a gate while the clock moves past the lease; then the gate opens.
    """
    import threading

    from engine.core.clock import ManualClock
    from engine.execution.worker import Worker
    from engine.plugins.workflow_registry import load_registry
    from engine.scheduling import definitions, tick
    from tests.flows.testflows import FOUR_STEPS
    from tests.support import make_runtime

    log, gate = tmp_path / "steps.log", tmp_path / "gate"
    spec = four("lease", "UTC")
    rt = make_runtime(store_url, schedules=[spec], clock=ManualClock(APPLIED),
                      registry={**load_registry(), "four_steps": FOUR_STEPS},
                      extra={"testflow": {"log": str(log), "gate": str(gate), "block_on": ["TWO"]},
                             "worker": {"lease": "30s"}})
    try:
        definitions.apply(rt)
        rt.clock.set(APPLIED + timedelta(minutes=3))
        assert tick.tick(rt).runs_created == 1
        outcome: list[Any] = []
        worker = threading.Thread(target=lambda: outcome.append(Worker(rt, "w").run_one()))
        worker.start()
        wait(lambda: log.exists() and "TWO" in log.read_text(), 60, "step TWO to start")
        rt.clock.advance(timedelta(seconds=45))  # past the 30 s lease, no beat landed
        gate.touch()
        worker.join(timeout=60)
        starts, ends = step_executions(log)
        run_id = next(iter(starts))[0]
        assert ends[(run_id, "TWO")] == 0, "the step made its external effect with a lease that had run out"
        assert outcome and outcome[0].error_code == "LEASE_LOST", outcome
    finally:
        rt.store.dispose()
