"""PostgreSQL: 1 vs 2 vs 4 ``reportflow work --until-idle`` processes on the same queue of runs.

Per repetition, side by side, each on a fresh database (``CREATE DATABASE ... TEMPLATE``
of one migrated once): ``--runs`` QUEUED runs of the ``four_steps`` test workflow
(``tests/flows``), each step waiting 20 ms (``[testflow] sleep_ms = 20``) and logging
``start``/``end`` lines to a side-effect log. The runs are made in-process by
``definitions.apply`` + ``tick.tick`` (not timed); then 1, or 2, real worker
processes drain them (``tests/acceptance/procs.py``: the real CLI, a shared
``--now T@E`` clock).

Each run belongs to its own schedule (500 schedules, one due slot each). With
``--shared-schedule`` all runs come from one minute schedule instead: on this
engine revision that makes two workers finishing runs of the same schedule
deadlock in PostgreSQL (see docs/BENCHMARKS.md), and a worker process dies.

Throughput counts from the first claim to the last completion, read from the runs'
own timestamps (one shared clock), so process start-up is not in it; the wall
time including start-up is shown too. Checks: every run SUCCESS, every step
started and ended exactly once in the side-effect log (no duplicate execution),
and with several workers each process did work. Claim conflicts are what the server counted in the
pass's database (``pg_stat_database``): rolled-back transactions (a claim that lost, a retried
write) and deadlocks. Target (SPEC §11): 2 ÷ 1 ≥ 1.7×.
"""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _common as c
import sqlalchemy as sa

from engine.core.clock import ManualClock
from engine.scheduling import definitions, tick
from engine.store import database
from engine.store.tables import runs
from tests.acceptance import procs
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime, write_config

T0 = datetime(2026, 9, 29, 0, 0, 30, tzinfo=UTC)
STEP_SLEEP_MS = 20


def with_db(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


class Databases:
    """A migrated template database and a fresh copy of it per pass."""

    def __init__(self) -> None:
        self.admin = sa.create_engine(c.PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        self.prefix = f"rf_bench_{uuid.uuid4().hex[:6]}"
        self.template = f"{self.prefix}_tpl"
        self.made: list[str] = []
        with self.admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{self.template}"'))
        engine = database.create_db_engine(with_db(c.PG_ADMIN_URL, self.template))
        database.upgrade(engine)
        engine.dispose()

    def fresh(self) -> str:
        name = f"{self.prefix}_{len(self.made)}"
        with self.admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"'))
        self.made.append(name)
        return with_db(c.PG_ADMIN_URL, name)

    def drop_all(self) -> None:
        with self.admin.connect() as conn:
            for name in [*self.made, self.template]:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.admin.dispose()


def schedule_configs(runs_wanted: int, shared: bool) -> list[dict[str, object]]:
    base = dict(workflow="four_steps", cron="* * * * *", timezone="UTC", allow_frequent=True, overlap="ALLOW",
                misfire="CATCH_UP_ALL")
    if shared:
        return [dict(base, name="four", project="p1")]
    return [dict(base, name=f"four{i:04d}", project=f"p{i:04d}") for i in range(runs_wanted)]


def one_pass(dbs: Databases, folder: Path, runs_wanted: int, workers: int, shared: bool) -> dict[str, float]:
    url = dbs.fresh()
    log = folder / "steps.log"
    log.unlink(missing_ok=True)
    flow = {"log": str(log), "sleep_ms": STEP_SLEEP_MS}
    configs = schedule_configs(runs_wanted, shared)
    clock = ManualClock(T0)
    rt = make_runtime(url, schedules=configs, clock=clock, registry={"four_steps": FOUR_STEPS},
                      extra={"testflow": flow})
    definitions.apply(rt)
    clock.advance(timedelta(minutes=runs_wanted if shared else 1))
    assert tick.tick(rt).runs_created == runs_wanted
    config = write_config(folder / "reportflow.toml", db_url=url, schedules=configs,
                          sections={"worker": {"lease": "60s", "poll_interval": "0.2s"}, "testflow": flow})
    shared = procs.Shared(clock.now() + timedelta(minutes=1))
    before = conflicts(url)
    wall, outs = c.timed(lambda: [p.communicate(timeout=900) for p in [
        procs.spawn(folder, config, "work", "--until-idle", "--worker-id", f"w{i}", now=shared.at())
        for i in range(workers)]])
    with rt.store.read() as conn:
        statuses = Counter(dict(conn.execute(sa.select(runs.c.status, sa.func.count())
                                             .group_by(runs.c.status)).all()))
        first, last = conn.execute(sa.select(sa.func.min(runs.c.claimed_at), sa.func.max(runs.c.completed_at))).one()
    rt.store.dispose()
    assert statuses == {"SUCCESS": runs_wanted}, (statuses, outs)
    lines = [line.split() for line in log.read_text().splitlines()]
    starts = Counter((w[1], w[2]) for w in lines if w[0] == "start")
    ends = Counter((w[1], w[2]) for w in lines if w[0] == "end")
    duplicates = sum(n - 1 for n in starts.values()) + sum(n - 1 for n in ends.values())
    assert len(ends) == 4 * runs_wanted and duplicates == 0, ("duplicate or missing executions", duplicates)
    pids = {w[3] for w in lines if w[0] == "end"}
    assert len(pids) == workers, f"{workers} workers but {len(pids)} processes executed steps"
    span = (last - first).total_seconds()
    rollbacks, deadlocks = (a - b for a, b in zip(conflicts(url), before, strict=True))
    return {"runs_per_s": runs_wanted / span, "span_s": span, "wall_s": wall, "duplicates": duplicates,
            "processes": len(pids), "rollbacks": rollbacks, "deadlocks": deadlocks}


def conflicts(url: str) -> tuple[int, int]:
    """(rolled-back transactions, deadlocks) the server has counted in ``url``'s database so far."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT pg_stat_clear_snapshot()"))
        row = conn.execute(sa.text("SELECT xact_rollback, deadlocks FROM pg_stat_database "
                                   "WHERE datname = current_database()")).one()
    engine.dispose()
    return int(row[0]), int(row[1])


def main() -> None:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--shared-schedule", action="store_true", help="all runs from one schedule (see the docstring)")
    p.add_argument("--workers", default="1,2,4", help="the worker process counts to compare (default 1,2,4)")
    args = p.parse_args()
    reps = c.check_reps(args.reps)
    counts = sorted({int(n) for n in args.workers.split(",")} | {1})
    c.announce("bench_workers.py")
    dbs = Databases()
    results: dict[int, list[dict[str, float]]] = {n: [] for n in counts}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
            for rep in range(reps):
                for workers in counts:
                    folder = Path(tmp) / f"r{rep}w{workers}"
                    folder.mkdir()
                    results[workers].append(one_pass(dbs, folder, args.runs, workers, args.shared_schedule))
                one = results[1][-1]["runs_per_s"]
                print(f"rep {rep + 1}/{reps}: " + ", ".join(
                    f"{n} worker(s) {results[n][-1]['runs_per_s']:.2f} runs/s ({results[n][-1]['runs_per_s'] / one:.2f}×, "
                    f"{results[n][-1]['rollbacks']:.0f} rollbacks)" for n in counts), flush=True)
    finally:
        dbs.drop_all()
    floor = 1000 / (4 * STEP_SLEEP_MS)
    rows = [c.stat_row(f"1 worker: runs/s ({args.runs} runs, 4 × {STEP_SLEEP_MS} ms steps)",
                       [r["runs_per_s"] for r in results[1]])]
    for n in counts[1:]:
        rows += [c.stat_row(f"{n} workers: runs/s", [r["runs_per_s"] for r in results[n]]),
                 c.stat_row(f"{n} ÷ 1 throughput (same rep, first claim → last completion)",
                            [t["runs_per_s"] / o["runs_per_s"] for o, t in zip(results[1], results[n], strict=True)],
                            "x"),
                 c.stat_row(f"{n} ÷ 1 by wall time incl. process start-up",
                            [o["wall_s"] / t["wall_s"] for o, t in zip(results[1], results[n], strict=True)], "x")]
    for n in counts:
        rows += [c.stat_row(f"{n} worker(s): rolled-back transactions per pass", [r["rollbacks"] for r in results[n]]),
                 c.stat_row(f"{n} worker(s): deadlocks per pass", [r["deadlocks"] for r in results[n]])]
    rows.append(["duplicate step executions (side-effect log), all passes",
                 str(sum(r["duplicates"] for rs in results.values() for r in rs)), "", "", str(len(counts) * reps)])
    print()
    print(c.table(c.STAT_HEADERS, rows))
    print(f"\nsleep-only ceiling: {floor:.1f} runs/s per worker; target 2 ÷ 1 ≥ 1.7×")
    c.save("bench_workers", {"runs": args.runs, **{f"w{n}": results[n] for n in counts}})


if __name__ == "__main__":
    main()
