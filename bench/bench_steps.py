"""Steps recorded per second: trivial 4-step runs on SQLite (WAL, synchronous=FULL), one process.

Per repetition, side by side (SPEC §11, target: step transitions/s ≥ 40% of the raw rate):

1. raw: ``BEGIN IMMEDIATE; INSERT one row; COMMIT`` through ``sqlite3``, same pragmas,
   measured right before and right after the engine pass (their mean is the rep's raw rate,
   so a disturbance during the rep shows on both sides of the ratio);
2. engine: ``--runs`` QUEUED runs of a no-op 4-step workflow, each claimed and driven
   to SUCCESS by ``Worker.run_one`` (1 claim commit + 4 step-boundary commits per run);
3. replay: the very SQL the engine issued for those runs (statements, parameters,
   BEGINs and COMMITs, recorded once from an untimed pass) replayed through ``sqlite3``
   on a copy of the same database: the rate this design reaches with no Python,
   SQLAlchemy or thread overhead at all, i.e. the ceiling of the implementation; and
   the same statements with one COMMIT per 8 write transactions: the ceiling of
   group commit at concurrency 8 (``bench_concurrency``), fsyncs shared, no Python;
4. DBOS Transact (bench venv, a subprocess) running the same 4-step workflow
   ``--runs`` times on a SQLite system database in WAL.

``--profile`` adds one cProfile'd engine pass and prints where its time goes.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import shutil
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _common as c
from sqlalchemy import event

from engine.core.clock import ManualClock
from engine.core.models import PeriodKind, RunStatus
from engine.execution.worker import Worker
from engine.plugins.contract import StepContext, StepResult, StepSpec, WorkflowDef
from engine.scheduling import definitions, tick
from tests.support import make_runtime

T0 = datetime(2026, 9, 29, 0, 0, tzinfo=UTC)
RAW_COMMITS = 1000


def noop(ctx: StepContext) -> StepResult:
    return StepResult()


BENCH4 = WorkflowDef(name="bench4", period=PeriodKind.SLOT,
                     steps=tuple(StepSpec(name, noop) for name in ("ONE", "TWO", "THREE", "FOUR")))
# The same steps declared ``inline`` (run on the worker's thread, no hand-off to the step thread).
BENCH4_INLINE = WorkflowDef(name="bench4", period=PeriodKind.SLOT,
                            steps=tuple(StepSpec(name, noop, inline=True) for name in ("ONE", "TWO", "THREE", "FOUR")))


def raw_commit_rate(folder: Path, commits: int = RAW_COMMITS) -> float:
    """Durable single-row transactions per second, with the engine's pragmas."""
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    seconds, _ = c.timed(lambda: [conn.execute("BEGIN IMMEDIATE") and conn.execute(
        "INSERT INTO t (v) VALUES (?)", ("x",)) and conn.execute("COMMIT") for _ in range(commits)])
    conn.close()
    return commits / seconds


SCHEDULE = dict(name="bench4", workflow="bench4", project="bench", cron="* * * * *", timezone="UTC",
                allow_frequent=True, overlap="ALLOW", misfire="CATCH_UP_ALL")


def runtime_on(path: Path, clock: ManualClock, inline: bool = False):  # type: ignore[no-untyped-def]
    return make_runtime(f"sqlite:///{path}", schedules=[SCHEDULE], clock=clock,
                        registry={"bench4": BENCH4_INLINE if inline else BENCH4})


def build_template(folder: Path, runs: int) -> Path:
    """A database holding ``runs`` QUEUED bench4 runs, made by a tick (not timed), WAL checkpointed."""
    path = folder / "template.db"
    clock = ManualClock(T0)
    rt = runtime_on(path, clock)
    definitions.apply(rt)
    clock.advance(timedelta(minutes=runs))
    report = tick.tick(rt)
    assert report.created == {RunStatus.QUEUED.value: runs}, report.created
    rt.store.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def copy_of(template: Path, name: str) -> Path:
    path = template.with_name(name)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, path)
    return path


def queued_runtime(template: Path, runs: int, inline: bool = False):  # type: ignore[no-untyped-def]
    """A runtime on a fresh copy of the template; its clock where the tick left it."""
    return runtime_on(copy_of(template, "engine.db"), ManualClock(T0 + timedelta(minutes=runs)), inline)


class _Recorder:
    """Every statement (with its parameters), COMMIT and ROLLBACK a sqlite3 connection runs."""

    log: list[tuple[str, object, bool]] = []

    class Cursor(sqlite3.Cursor):
        def execute(self, sql: str, parameters: object = (), /) -> sqlite3.Cursor:  # type: ignore[override]
            if not sql.startswith("PRAGMA"):
                _Recorder.log.append((sql, parameters, False))
            return super().execute(sql, parameters)  # type: ignore[arg-type]

        def executemany(self, sql: str, seq: object, /) -> sqlite3.Cursor:  # type: ignore[override]
            rows = list(seq)  # type: ignore[call-overload]
            _Recorder.log.append((sql, rows, True))
            return super().executemany(sql, rows)

    class Connection(sqlite3.Connection):
        def cursor(self, factory: type = None) -> sqlite3.Cursor:  # type: ignore[override,assignment]
            return super().cursor(factory or _Recorder.Cursor)

        def commit(self) -> None:
            _Recorder.log.append(("COMMIT", None, False))
            super().commit()

        def rollback(self) -> None:
            _Recorder.log.append(("ROLLBACK", None, False))
            super().rollback()


def record_sql(template: Path, runs: int) -> list[tuple[str, object, bool]]:
    """Every statement (SQL and parameters, as the driver got them), BEGIN and COMMIT the engine issues.

    Recorded by a ``sqlite3.Connection`` subclass under SQLAlchemy, so the statements
    executed on the DBAPI cursor below SQLAlchemy are included, and the replay binds the
    same parameters to the same SQL text (prepared once, as the engine's are).
    """
    rt = queued_runtime(template, runs)
    _Recorder.log = []

    @event.listens_for(rt.store.engine, "do_connect")
    def _recording(dialect, conn_rec, cargs, cparams):  # type: ignore[no-untyped-def]
        cparams["factory"] = _Recorder.Connection

    rt.store.engine.dispose()  # connections opened from here on record
    assert drain(rt) == runs
    rt.store.dispose()
    log, _Recorder.log = _Recorder.log, []
    return log


def replay(template: Path, log: list[tuple[str, object, bool]]) -> float:
    """Seconds to replay the recorded SQL through sqlite3 with the engine's pragmas."""
    conn = sqlite3.connect(copy_of(template, "replay.db"), isolation_level=None)
    for pragma in ("busy_timeout = 30000", "journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON"):
        conn.execute(f"PRAGMA {pragma}")

    def run() -> None:
        for statement, parameters, many in log:
            if statement == "COMMIT":
                conn.commit()
            elif statement == "ROLLBACK":
                conn.rollback()
            elif many:
                conn.executemany(statement, parameters)  # type: ignore[arg-type]
            else:
                conn.execute(statement, parameters)  # type: ignore[arg-type]

    seconds, _ = c.timed(run)
    (done,) = conn.execute("SELECT count(*) FROM runs WHERE status = 'SUCCESS'").fetchone()
    conn.close()
    assert done > 0
    return seconds


def grouped(log: list[tuple[str, object, bool]], size: int) -> list[tuple[str, object, bool]]:
    """The same statements with one COMMIT per ``size`` write transactions (group commit, no Python)."""
    out: list[tuple[str, object, bool]] = []
    open_, ended = False, 0
    for entry in log:
        if entry[0] == "BEGIN IMMEDIATE":
            if open_:
                continue
            open_ = True
        elif entry[0] == "ROLLBACK":  # the pool resetting a connection it got back: nothing to undo
            continue
        elif entry[0] == "COMMIT":
            ended += 1
            if ended % size:
                continue
            open_ = False
        out.append(entry)
    if open_:
        out.append(("COMMIT", None, False))
    return out


def drain(rt) -> int:  # type: ignore[no-untyped-def]
    worker = Worker(rt, "bench")
    done = 0
    while (outcome := worker.run_one()) is not None:
        assert outcome.status is RunStatus.SUCCESS, outcome
        done += 1
    worker.close()
    return done


def engine_pass(template: Path, runs: int, inline: bool = False) -> float:
    rt = queued_runtime(template, runs, inline)
    seconds, done = c.timed(lambda: drain(rt))
    assert done == runs
    with rt.store.read() as conn:
        pragmas = (conn.exec_driver_sql("PRAGMA journal_mode").scalar(),
                   conn.exec_driver_sql("PRAGMA synchronous").scalar())
    assert pragmas == ("wal", 2), pragmas  # the engine's defaults: WAL, FULL
    rt.store.dispose()
    return seconds


def profile_pass(template: Path, runs: int) -> str:
    rt = queued_runtime(template, runs)
    profiler = cProfile.Profile()
    profiler.enable()
    drain(rt)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(35)
    # Statements still going through SQLAlchemy's whole pipeline (~30 µs each over fastsql): who issues them.
    pstats.Stats(profiler, stream=out).print_callers(r"base.py:\d+\(execute\)")
    rt.store.dispose()
    return out.getvalue()


def main() -> None:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--no-dbos", action="store_true", help="skip the DBOS comparison")
    p.add_argument("--profile", action="store_true", help="also print a cProfile of one engine pass")
    p.add_argument("--dir", default=None, help="where the databases go (default: a temporary directory); "
                   "/dev/shm makes every fsync free and shows the CPU ceiling")
    args = p.parse_args()
    reps = c.check_reps(args.reps)
    c.announce("bench_steps.py")
    with_dbos = not args.no_dbos and c.bench_python() is not None
    raw, engine, inline, replayed, replayed8, dbos, dbos_meta = [], [], [], [], [], [], {}
    tmp_dir = tempfile.TemporaryDirectory(prefix="bench-steps-", dir=args.dir)
    folder = Path(tmp_dir.name)
    template = build_template(folder, args.runs)
    log = record_sql(template, args.runs)
    commits = sum(1 for statement, _, _ in log if statement == "COMMIT")
    writes = sum(1 for statement, _, _ in log if statement == "BEGIN IMMEDIATE")
    print(f"the engine issues {len(log) - commits} statements and {commits} commits ({writes} write transactions) "
          f"for {args.runs} runs", flush=True)
    for rep in range(reps):
        before = raw_commit_rate(folder)
        engine.append(engine_pass(template, args.runs))
        inline.append(engine_pass(template, args.runs, inline=True))
        raw.append((before + raw_commit_rate(folder)) / 2)
        replayed.append(replay(template, log))
        replayed8.append(replay(template, grouped(log, 8)))
        if with_dbos:
            dbos_meta = c.run_comparator(c.REPO_ROOT / "bench" / "comparators" / "dbos_steps.py",
                                         "--runs", str(args.runs))
            assert dbos_meta["steps_recorded"] == 4 * args.runs, dbos_meta
            dbos.append(dbos_meta["seconds"])
        print(f"rep {rep + 1}/{reps}: raw {raw[-1]:,.0f} commits/s, engine {4 * args.runs / engine[-1]:,.0f} steps/s, "
              f"inline {4 * args.runs / inline[-1]:,.0f} steps/s, "
              f"replay {4 * args.runs / replayed[-1]:,.0f} steps/s"
              + (f", dbos {4 * args.runs / dbos[-1]:,.0f} steps/s" if dbos else ""), flush=True)

    steps = 4 * args.runs
    engine_steps = [steps / s for s in engine]
    ratio = [e / r for e, r in zip(engine_steps, raw, strict=True)]
    rows = [c.stat_row("raw SQLite commits/s (BEGIN IMMEDIATE; INSERT; COMMIT)", raw),
            c.stat_row(f"engine runs/s ({args.runs} runs, claim → SUCCESS)", [args.runs / s for s in engine]),
            c.stat_row("engine step transitions/s", engine_steps),
            c.stat_row("engine steps/s ÷ raw commits/s (same rep)", ratio, "%"),
            c.stat_row("engine, steps declared inline: step transitions/s", [steps / s for s in inline]),
            c.stat_row("engine inline steps/s ÷ raw commits/s (same rep)",
                       [steps / s / r for s, r in zip(inline, raw, strict=True)], "%"),
            c.stat_row("replay of the engine's SQL: step transitions/s", [steps / s for s in replayed]),
            c.stat_row("replay steps/s ÷ raw commits/s (same rep): the design's ceiling",
                       [steps / s / r for s, r in zip(replayed, raw, strict=True)], "%"),
            c.stat_row("engine ÷ replay (same rep): share of time that is the database's",
                       [p / e for p, e in zip(replayed, engine, strict=True)], "%"),
            c.stat_row("replay with one COMMIT per 8 write transactions ÷ raw: group commit's SQL ceiling",
                       [steps / s / r for s, r in zip(replayed8, raw, strict=True)], "x")]
    payload = {"runs": args.runs, "raw_commits_per_s": raw, "engine_seconds": engine, "ratio": ratio,
               "inline_seconds": inline,
               "replay_seconds": replayed, "replay_grouped8_seconds": replayed8, "statements": len(log) - commits, "commits": commits}
    if dbos:
        dbos_steps = [steps / s for s in dbos]
        rows += [c.stat_row(f"DBOS {dbos_meta['dbos_version']} step transitions/s", dbos_steps),
                 c.stat_row("DBOS steps/s ÷ raw commits/s (same rep)",
                            [d / r for d, r in zip(dbos_steps, raw, strict=True)], "%"),
                 c.stat_row("engine ÷ DBOS (same rep)", [e / d for e, d in zip(engine_steps, dbos_steps, strict=True)],
                            "x"),
                 c.stat_row("engine inline ÷ DBOS (same rep)",
                            [steps / s / d for s, d in zip(inline, dbos_steps, strict=True)], "x")]
        payload.update(dbos_seconds=dbos, dbos=dbos_meta)
    else:
        print("DBOS comparison skipped: " + ("--no-dbos" if args.no_dbos else f"no bench venv at {c.BENCH_VENV}"))
    print()
    print(c.table(c.STAT_HEADERS, rows))
    print(f"\nratio target ≥ 40%: median {c.fmt(sorted(ratio)[len(ratio) // 2], '%')} "
          f"({'met' if sorted(ratio)[len(ratio) // 2] >= 0.40 else 'MISSED'}); "
          "5 commits per run, so 4/5 = 80% is the ceiling")
    c.save("bench_steps", payload)
    if args.profile:
        print("\n" + profile_pass(template, args.runs))
    tmp_dir.cleanup()


if __name__ == "__main__":
    main()
