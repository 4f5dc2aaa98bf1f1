"""Model hosts as pools: 40 slow generations on one node against the same 40 on two, each node with its own local
model server (the same ``http://127.0.0.1:PORT`` for both: what two machines each running Ollama look like).

Two ``reportflow work --until-idle`` processes share one SQLite database either way: with one node name they
share the local host's pool of ``[llm] slots = 1`` (one generation at a time); with two (``REPORTFLOW_NODE``)
each has its own. The fake model answers each generation after ``--delay`` seconds. Printed: the seconds until
both processes are done, best of ``--reps`` each, side by side, and their ratio.

Usage: ``.venv/bin/python bench/bench_model_pool.py [--reps 3] [--runs 40] [--delay 0.5]``
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import _common as c

from tests.fakes.fake_ollama import FakeOllama
from tests.fakes.gitrepo import make_repo
from tests.support import write_config


def once(root: Path, nodes: tuple[str, str], runs: int, delay: float) -> float:
    repo = make_repo(root)
    first = date(2026, 1, 1)
    for n in range(runs):
        repo.commit(f"work of day {n}", at=datetime.combine(first + timedelta(days=n), datetime.min.time(), UTC)
                    + timedelta(hours=12))
    fake = FakeOllama().start()
    fake.generation_delay_s = delay
    try:
        config = write_config(
            root / "reportflow.toml", db_url=f"sqlite:///{root / 'rf.db'}",
            sections={"llm": {"provider": "ollama", "host": fake.url, "slots": 1},
                      "reports": {"dir": str(root / "out")}, "worker": {"poll_interval": "0.1s"}},
            projects=[dict(key="p", repo=str(repo.path), branches=["main"])],
            schedules=[dict(name="daily", workflow="daily_report", project="p", cron="0 3 * * *", timezone="UTC")])
        cli = [sys.executable, "-m", "engine.cli", "--config", str(config), "--now", "2026-06-01T00:00:00Z"]
        subprocess.run([*cli, "schedules", "apply"], check=True, capture_output=True, cwd=c.REPO_ROOT)
        last = first + timedelta(days=runs - 1)
        subprocess.run([*cli, "trigger", "daily", "--from", first.isoformat(), "--to", last.isoformat(), "--yes"],
                       check=True, capture_output=True, cwd=c.REPO_ROOT)
        began = time.perf_counter()
        workers = [subprocess.Popen([*cli, "work", "--until-idle"], cwd=c.REPO_ROOT, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env={**os.environ, "REPORTFLOW_NODE": node})
                   for node in nodes]
        for worker in workers:
            assert worker.wait(timeout=900) == 0
        took = time.perf_counter() - began
        assert fake.generations == runs, fake.generations
        return took
    finally:
        fake.stop()


def main() -> None:
    parser = c.parser(__doc__.splitlines()[0], reps=3)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--delay", type=float, default=0.5)
    args = parser.parse_args()
    c.announce("bench_model_pool")
    one, two = [], []
    for rep in range(c.check_reps(args.reps)):
        pair = [(one, ("n1", "n1")), (two, ("n1", "n2"))]
        for bucket, nodes in (pair if rep % 2 == 0 else pair[::-1]):
            with tempfile.TemporaryDirectory(prefix="bench-pool-") as tmp:
                bucket.append(once(Path(tmp), nodes, args.runs, args.delay))
    print(c.table(["setup", f"{args.runs} generations of {args.delay:g} s (best)", "median"],
                  [["2 workers, 1 node (one pool)", c.fmt(min(one), "s"), c.fmt(sorted(one)[len(one) // 2], "s")],
                   ["2 workers, 2 nodes (a pool each)", c.fmt(min(two), "s"), c.fmt(sorted(two)[len(two) // 2], "s")]]))
    print(f"two nodes / one node: {min(two) / min(one):.2f}x the time")
    c.save("bench_model_pool", {"one_node_s": one, "two_nodes_s": two, "machine": c.machine()})


if __name__ == "__main__":
    main()
