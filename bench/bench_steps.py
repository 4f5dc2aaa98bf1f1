"""Steps recorded per second: trivial 4-step runs on SQLite (WAL, synchronous=FULL), one process.

Per repetition, side by side (SPEC §11, target: step transitions/s ≥ 40% of the raw rate):

1. raw: ``BEGIN IMMEDIATE; INSERT one row; COMMIT`` through ``sqlite3``, same pragmas;
2. engine: ``--runs`` QUEUED runs of a no-op 4-step workflow, each claimed and driven
   to SUCCESS by ``Worker.run_one`` (1 claim commit + 4 step-boundary commits per run);
3. DBOS Transact (bench venv, a subprocess) running the same 4-step workflow
   ``--runs`` times on a SQLite system database in WAL.

``--profile`` adds one cProfile'd engine pass and prints where its time goes.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _common as c

from engine import scheduler, schedules
from engine.clock import ManualClock
from engine.models import PeriodKind, RunStatus
from engine.worker import Worker
from engine.workflow import StepContext, StepResult, StepSpec, WorkflowDef
from tests.support import make_runtime

T0 = datetime(2026, 9, 29, 0, 0, tzinfo=UTC)
RAW_COMMITS = 2000


def noop(ctx: StepContext) -> StepResult:
    return StepResult()


BENCH4 = WorkflowDef(name="bench4", period=PeriodKind.SLOT,
                     steps=tuple(StepSpec(name, noop) for name in ("ONE", "TWO", "THREE", "FOUR")))


def raw_commit_rate(folder: Path, commits: int = RAW_COMMITS) -> float:
    """Durable single-row transactions per second, with the engine's pragmas."""
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    seconds, _ = c.timed(lambda: [conn.execute("BEGIN IMMEDIATE") and conn.execute(
        "INSERT INTO t (v) VALUES (?)", ("x",)) and conn.execute("COMMIT") for _ in range(commits)])
    conn.close()
    return commits / seconds


def queued_runtime(folder: Path, runs: int):  # type: ignore[no-untyped-def]
    """A fresh SQLite store holding ``runs`` QUEUED bench4 runs (made by a tick; not timed)."""
    clock = ManualClock(T0)
    schedule = dict(name="bench4", workflow="bench4", project="bench", cron="* * * * *", timezone="UTC",
                    allow_frequent=True, overlap="ALLOW", misfire="CATCH_UP_ALL")
    rt = make_runtime(f"sqlite:///{folder / 'rf.db'}", schedules=[schedule], clock=clock,
                      registry={"bench4": BENCH4})
    schedules.apply(rt)
    clock.advance(timedelta(minutes=runs))
    report = scheduler.tick(rt)
    assert report.created == {RunStatus.QUEUED.value: runs}, report.created
    return rt


def drain(rt) -> int:  # type: ignore[no-untyped-def]
    worker = Worker(rt, "bench")
    done = 0
    while (outcome := worker.run_one()) is not None:
        assert outcome.status is RunStatus.SUCCESS, outcome
        done += 1
    worker.close()
    return done


def engine_pass(folder: Path, runs: int) -> float:
    rt = queued_runtime(folder, runs)
    seconds, done = c.timed(lambda: drain(rt))
    assert done == runs
    with rt.store.read() as conn:
        pragmas = (conn.exec_driver_sql("PRAGMA journal_mode").scalar(),
                   conn.exec_driver_sql("PRAGMA synchronous").scalar())
    assert pragmas == ("wal", 2), pragmas  # the engine's defaults: WAL, FULL
    rt.store.dispose()
    return seconds


def profile_pass(folder: Path, runs: int) -> str:
    rt = queued_runtime(folder, runs)
    profiler = cProfile.Profile()
    profiler.enable()
    drain(rt)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(35)
    rt.store.dispose()
    return out.getvalue()


def main() -> None:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--no-dbos", action="store_true", help="skip the DBOS comparison")
    p.add_argument("--profile", action="store_true", help="also print a cProfile of one engine pass")
    args = p.parse_args()
    reps = c.check_reps(args.reps)
    with_dbos = not args.no_dbos and c.bench_python() is not None
    raw, engine, dbos, dbos_meta = [], [], [], {}
    for rep in range(reps):
        with tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp:
            folder = Path(tmp)
            raw.append(raw_commit_rate(folder))
            engine.append(engine_pass(folder, args.runs))
        if with_dbos:
            dbos_meta = c.run_comparator(c.REPO_ROOT / "bench" / "comparators" / "dbos_steps.py",
                                         "--runs", str(args.runs))
            assert dbos_meta["steps_recorded"] == 4 * args.runs, dbos_meta
            dbos.append(dbos_meta["seconds"])
        print(f"rep {rep + 1}/{reps}: raw {raw[-1]:,.0f} commits/s, engine {4 * args.runs / engine[-1]:,.0f} steps/s"
              + (f", dbos {4 * args.runs / dbos[-1]:,.0f} steps/s" if dbos else ""), flush=True)

    steps = 4 * args.runs
    engine_steps = [steps / s for s in engine]
    ratio = [e / r for e, r in zip(engine_steps, raw, strict=True)]
    rows = [c.stat_row("raw SQLite commits/s (BEGIN IMMEDIATE; INSERT; COMMIT)", raw, higher_is_better=True),
            c.stat_row(f"engine runs/s ({args.runs} runs, claim → SUCCESS)", [args.runs / s for s in engine],
                       higher_is_better=True),
            c.stat_row("engine step transitions/s", engine_steps, higher_is_better=True),
            c.stat_row("engine steps/s ÷ raw commits/s (same rep)", ratio, "%", higher_is_better=True)]
    payload = {"runs": args.runs, "raw_commits_per_s": raw, "engine_seconds": engine, "ratio": ratio}
    if dbos:
        dbos_steps = [steps / s for s in dbos]
        rows += [c.stat_row(f"DBOS {dbos_meta['dbos_version']} step transitions/s", dbos_steps,
                            higher_is_better=True),
                 c.stat_row("DBOS steps/s ÷ raw commits/s (same rep)",
                            [d / r for d, r in zip(dbos_steps, raw, strict=True)], "%", higher_is_better=True),
                 c.stat_row("engine ÷ DBOS (same rep)", [e / d for e, d in zip(engine_steps, dbos_steps, strict=True)],
                            "x", higher_is_better=True)]
        payload.update(dbos_seconds=dbos, dbos=dbos_meta)
    else:
        print("DBOS comparison skipped: " + ("--no-dbos" if args.no_dbos else f"no bench venv at {c.BENCH_VENV}"))
    print()
    print(c.table(["measure", "best", "median", "reps"], rows))
    print(f"\nratio target ≥ 40%: median {c.fmt(sorted(ratio)[len(ratio) // 2], '%')} "
          f"({'met' if sorted(ratio)[len(ratio) // 2] >= 0.40 else 'MISSED'}); "
          "5 commits per run, so 4/5 = 80% is the ceiling")
    c.save("bench_steps", payload)
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="bench-steps-prof-") as tmp:
            print("\n" + profile_pass(Path(tmp), args.runs))


if __name__ == "__main__":
    main()
