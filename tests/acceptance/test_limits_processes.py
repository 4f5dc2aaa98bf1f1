"""Concurrency caps across processes (SPEC §18): four ``reportflow work`` processes share one database
and never run more than the cap at once, on SQLite and on PostgreSQL.

A watcher thread reads the database throughout (its own connection, as an operator's
query would) and keeps the most runs it ever saw RUNNING at once.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select

from engine.store.tables import runs
from tests.acceptance import procs
from tests.acceptance.test_processes import db, flow_config, four
from tests.acceptance.test_work_concurrency import T0, many

pytestmark = pytest.mark.slow
RUNS = 12
CAP = 2


class Watcher(threading.Thread):
    """Samples the number of RUNNING runs until stopped; ``most`` is the largest sample."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.engine = db(url)
        self.stopping = threading.Event()
        self.most = 0
        self.samples = 0

    def run(self) -> None:
        query = select(func.count()).select_from(runs).where(runs.c.status == "RUNNING")
        with self.engine.connect() as conn:
            while not self.stopping.is_set():
                self.most = max(self.most, conn.execute(query).scalar_one())
                conn.rollback()  # a fresh snapshot for the next sample
                self.samples += 1

    def stop(self) -> int:
        self.stopping.set()
        self.join(timeout=30)
        self.engine.dispose()
        return self.most


def statuses(url: str) -> list[str]:
    engine = db(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(runs.c.status)).scalars())
    finally:
        engine.dispose()


@pytest.mark.parametrize("limits", [{"limits": {"max_running": CAP}},
                                    {"limits.workflows": {"four_steps": CAP}}], ids=["max_running", "per_workflow"])
def test_four_worker_processes_never_run_more_than_the_cap(store_url: str, tmp_path: Path,
                                                           limits: dict[str, dict[str, object]]) -> None:
    config = flow_config(tmp_path, store_url, schedules=many(RUNS), sleep_ms=40)
    config.write_text(config.read_text() + "".join(
        f"\n[{section}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()) for section, values in limits.items()))
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    procs.ok(procs.run(tmp_path, config, "tick", now=clock.at(60)))
    assert statuses(store_url) == ["QUEUED"] * RUNS
    watcher = Watcher(store_url)
    watcher.start()
    workers = [procs.spawn(tmp_path, config, "work", "--worker-id", f"w{i}", now=clock.at(60)) for i in range(4)]
    try:
        procs.wait_for(lambda: statuses(store_url) == ["SUCCESS"] * RUNS, timeout=240, what="every run to succeed")
    finally:
        most = watcher.stop()
        for worker in workers:
            worker.terminate()
            procs.finish(worker, timeout=60)
    assert watcher.samples > 50
    assert most == CAP  # reached, never passed


def test_work_names_the_full_cap_it_waits_for(sqlite_url: str, tmp_path: Path) -> None:
    """One run RUNNING (held at the gate) fills ``max_running = 1``: another ``work`` claims nothing and says why."""
    config = flow_config(tmp_path, sqlite_url, schedules=[four(name="a", project="p1"), four(name="b", project="p2")],
                         block_on=["TWO"])
    config.write_text(config.read_text() + "\n[limits]\nmax_running = 1\n")
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    procs.ok(procs.run(tmp_path, config, "tick", now=clock.at(60)))
    holder = procs.spawn(tmp_path, config, "work", "--worker-id", "holder", now=clock.at(60))
    try:
        procs.wait_for(lambda: sorted(statuses(sqlite_url)) == ["QUEUED", "RUNNING"], what="one run to be claimed")
        idle = procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(61))
        procs.ok(idle)
        assert "1 four_steps run(s) wait for max_running = 1 (1 running)" in idle.stdout, idle.stdout
        assert sorted(statuses(sqlite_url)) == ["QUEUED", "RUNNING"]
    finally:
        (tmp_path / "gate").touch()
        holder.terminate()
        procs.finish(holder, timeout=60)
