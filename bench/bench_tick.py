"""Scheduler tick cost at 100, 1,000 and 10,000 enabled schedules: nothing due, and 10% due.

Setup (not timed), once per size: ``definitions.apply`` on a runtime whose config
holds N ``echo`` schedules, applied at 00:00:30. One schedule in ten fires at
``1 0 * * *`` (00:01), the others at ``0 3 * * *``. Then, per repetition:

* nothing due: ``tick.tick`` at 00:00:40 (the due query finds nothing);
* 10% due: a fresh copy of the database, ``tick.tick`` at 00:01:00, which
  creates N/10 runs (one per due schedule) and advances their ``next_run_at``;
* APScheduler 3 (bench venv, a subprocess): N jobs in a ``SQLAlchemyJobStore`` on
  SQLite (WAL, synchronous=FULL), 10% due; one wake-up (``_process_jobs``),
  with nothing due and with N/10 due.

Only the tick is timed: building the runtime and loading the config are not.
Targets (SPEC §11): nothing due at 10,000 < 10 ms; 1,000 runs out of 10,000 < 1 s.
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

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.scheduling import definitions, tick
from tests.support import make_runtime
from workflows import echo

DAY = datetime(2026, 9, 29, tzinfo=UTC)
APPLY_AT = DAY + timedelta(seconds=30)
QUIET_AT = DAY + timedelta(seconds=40)
DUE_AT = DAY + timedelta(minutes=1)
REGISTRY = {"echo": echo.WORKFLOW}


def schedule_configs(n: int) -> list[dict[str, object]]:
    return [dict(name=f"s{i:05d}", workflow="echo", project=f"p{i:05d}", timezone="UTC",
                 cron="1 0 * * *" if i % 10 == 0 else "0 3 * * *") for i in range(n)]


def build_template(folder: Path, n: int) -> Path:
    """A database holding N applied schedules (WAL checkpointed, so one file is the whole state)."""
    path = folder / f"template-{n}.db"
    rt = make_runtime(f"sqlite:///{path}", schedules=schedule_configs(n), clock=ManualClock(APPLY_AT),
                      registry=REGISTRY)
    report = definitions.apply(rt)
    assert len(report.created) == n
    rt.store.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def runtime_on(path: Path, at: datetime):  # type: ignore[no-untyped-def]
    """A runtime with an empty config: the config-load cost is not part of a tick."""
    return make_runtime(f"sqlite:///{path}", clock=ManualClock(at), registry=REGISTRY)


def quiet_tick(template: Path) -> float:
    rt = runtime_on(template, QUIET_AT)
    tick.tick(rt)  # warm-up: connection, statement cache
    seconds, report = c.timed(lambda: tick.tick(rt))
    assert report.due == 0 and report.runs_created == 0
    rt.store.dispose()
    return seconds


def due_tick(template: Path, folder: Path, n: int, profile: bool = False) -> tuple[float, str]:
    copy = folder / f"due-{n}.db"
    shutil.copyfile(template, copy)
    rt = runtime_on(copy, DUE_AT)
    with rt.store.read() as conn:  # warm the connection (the quiet tick's warm-up, without ticking)
        conn.exec_driver_sql("SELECT 1")
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    seconds, report = c.timed(lambda: tick.tick(rt))
    text = ""
    if profiler:
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        text = out.getvalue()
    assert report.created == {RunStatus.QUEUED.value: n // 10}, report.created
    rt.store.dispose()
    copy.unlink()
    return seconds, text


def main() -> None:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--sizes", default="100,1000,10000")
    p.add_argument("--no-apscheduler", action="store_true")
    p.add_argument("--profile", action="store_true", help="print a cProfile of one 10%%-due tick at the largest size")
    args = p.parse_args()
    reps = c.check_reps(args.reps)
    c.announce("bench_tick.py")
    sizes = [int(s) for s in args.sizes.split(",")]
    with_aps = not args.no_apscheduler and c.bench_python() is not None
    rows, payload = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-tick-") as tmp:
        folder = Path(tmp)
        for n in sizes:
            setup_s, template = c.timed(lambda n=n: build_template(folder, n))
            print(f"N={n}: applied in {setup_s:.1f} s (setup, not timed)", flush=True)
            quiet, due, aps_quiet, aps_due = [], [], [], []
            for _ in range(reps):
                quiet.append(quiet_tick(template))
                due.append(due_tick(template, folder, n)[0])
                if with_aps:
                    result = c.run_comparator(c.REPO_ROOT / "bench" / "comparators" / "apscheduler_tick.py",
                                              "--jobs", str(n), "--workdir", str(folder))
                    aps_quiet.append(result["quiet_s"])
                    aps_due.append(result["due_s"])
                    assert result["dispatched"] == n // 10, result
            rows.append(c.stat_row(f"engine tick, nothing due, N={n:,}", quiet, "ms"))
            rows.append(c.stat_row(f"engine tick, {n // 10:,} due of N={n:,}", due, "ms" if n < 10_000 else "s"))
            if aps_due:
                rows.append(c.stat_row(f"APScheduler 3 wake-up, nothing due, N={n:,}", aps_quiet, "ms"))
                rows.append(c.stat_row(f"APScheduler 3 wake-up, {n // 10:,} due of N={n:,}", aps_due,
                                       "ms" if n < 10_000 else "s"))
                rows.append(c.stat_row(f"APScheduler time ÷ engine time, {n // 10:,} due (same rep)",
                                       [a / e for a, e in zip(aps_due, due, strict=True)], "x"))
            payload[str(n)] = {"quiet_s": quiet, "due_s": due, "aps_quiet_s": aps_quiet, "aps_due_s": aps_due,
                               "setup_s": setup_s}
            print(f"N={n}: quiet median {sorted(quiet)[reps // 2] * 1000:.2f} ms, "
                  f"10% due median {sorted(due)[reps // 2]:.3f} s", flush=True)
        if not with_aps:
            print("APScheduler comparison skipped: "
                  + ("--no-apscheduler" if args.no_apscheduler else f"no bench venv at {c.BENCH_VENV}"))
        print()
        print(c.table(c.STAT_HEADERS, rows))
        c.save("bench_tick", payload)
        if args.profile:
            n = sizes[-1]
            print("\n" + due_tick(folder / f"template-{n}.db", folder, n, profile=True)[1])


if __name__ == "__main__":
    main()
