"""Runs in flight in one process: ``WorkerPool`` concurrency and group commit on SQLite (WAL, synchronous=FULL).

Per repetition, side by side (SPEC §11):

* **io**: ``--io-runs`` QUEUED runs of a 4-step workflow whose steps wait 20 ms
  (a ``threading.Event`` wait: I/O, no CPU), drained by a pool at concurrency 1
  and at concurrency 4. Target: concurrency 4 ≥ 3.5× concurrency 1.
* **trivial**: ``--runs`` QUEUED runs of a no-op 4-step workflow (steps declared
  ``inline``: no hand-off to a step thread; ``bench_steps`` shows both) drained at
  concurrency 1, at concurrency 8 without group commit (``group_commit = "0s"``)
  and at concurrency 8 with group commit (the default window, 2 ms), against
  the raw single-row commit rate (``BEGIN IMMEDIATE; INSERT; COMMIT`` through
  ``sqlite3``, same pragmas, measured before and after the engine passes).
  Target: concurrency 8 with group commit ≥ 1.0× the raw commit rate.

And, as the CPU ceiling, the group-commit pass once more with its database on tmpfs
(``/dev/shm``), where a COMMIT costs no fsync: what the same work reaches when the disk is free.

Every pass starts from a fresh copy of a template database made by a tick (not
timed); the pool is built before the clock starts; every run must end SUCCESS.
"""

from __future__ import annotations

import tempfile
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import _common as c
from bench_steps import T0, copy_of, raw_commit_rate

from engine.core.clock import ManualClock
from engine.core.models import PeriodKind, RunStatus
from engine.execution.pool import WorkerPool
from engine.plugins.contract import StepContext, StepResult, StepSpec, WorkflowDef
from engine.scheduling import definitions, tick
from tests.support import make_runtime

NAMES = ("ONE", "TWO", "THREE", "FOUR")


def noop(ctx: StepContext) -> StepResult:
    return StepResult()


def io_20ms(ctx: StepContext) -> StepResult:
    threading.Event().wait(0.020)
    return StepResult()


FLOWS = {"bench4": WorkflowDef(name="bench4", period=PeriodKind.SLOT,  # CPU-only steps: inline, as DBOS runs them
                               steps=tuple(StepSpec(n, noop, inline=True) for n in NAMES)),
         "io4": WorkflowDef(name="io4", period=PeriodKind.SLOT, steps=tuple(StepSpec(n, io_20ms) for n in NAMES))}


def runtime_on(path: Path, flow: str, clock: ManualClock, worker: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    spec = dict(name=flow, workflow=flow, project="bench", cron="* * * * *", timezone="UTC", allow_frequent=True,
                overlap="ALLOW", misfire="CATCH_UP_ALL")
    return make_runtime(f"sqlite:///{path}", schedules=[spec], clock=clock, registry=FLOWS,
                        extra={"worker": worker or {}})


def template(folder: Path, flow: str, runs: int) -> Path:
    path = folder / f"{flow}-template.db"
    clock = ManualClock(T0)
    rt = runtime_on(path, flow, clock)
    definitions.apply(rt)
    clock.advance(timedelta(minutes=runs))
    assert tick.tick(rt).created == {RunStatus.QUEUED.value: runs}
    rt.store.dispose()
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def drain(tpl: Path, flow: str, runs: int, concurrency: int, group_commit: str = "2ms") -> tuple[float, dict[int, int]]:
    """Seconds for a pool to drain ``runs`` with its real loop (``work --until-idle``; pool built before timing),
    and its batch sizes."""
    rt = runtime_on(copy_of(tpl, "engine.db"), flow, ManualClock(T0 + timedelta(minutes=runs)),
                    {"concurrency": concurrency, "group_commit": group_commit})
    pool = WorkerPool(rt, "bench")
    seconds, done = c.timed(lambda: pool.work(until_idle=True))
    sizes = dict(pool.committer.sizes) if pool.committer is not None else {}
    pool.close()
    assert len(done) == runs and {o.status for o in done} == {RunStatus.SUCCESS}, (len(done), runs)
    rt.store.dispose()
    return seconds, sizes


def main() -> None:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=500, help="trivial runs per pass")
    p.add_argument("--io-runs", type=int, default=100, help="20 ms-step runs per pass")
    p.add_argument("--dir", default=None, help="where the databases go (default: a temporary directory); "
                   "/dev/shm makes every fsync free and shows the CPU ceiling")
    args = p.parse_args()
    reps = c.check_reps(args.reps)
    c.announce("bench_concurrency.py")
    tmp = tempfile.TemporaryDirectory(prefix="bench-conc-", dir=args.dir)
    folder = Path(tmp.name)
    io_tpl, trivial_tpl = template(folder, "io4", args.io_runs), template(folder, "bench4", args.runs)
    # The CPU ceiling: the same group-commit pass on tmpfs, where a COMMIT's fsync costs nothing.
    shm = tempfile.TemporaryDirectory(prefix="bench-conc-shm-", dir="/dev/shm") if Path("/dev/shm").is_dir() else None
    shm_tpl = template(Path(shm.name), "bench4", args.runs) if shm is not None else None
    io1, io4, raw, t1, t8, t8g, t8g_shm = [], [], [], [], [], [], []
    sizes: dict[int, int] = {}
    for rep in range(reps):
        io1.append(drain(io_tpl, "io4", args.io_runs, 1)[0])
        io4.append(drain(io_tpl, "io4", args.io_runs, 4)[0])
        before = raw_commit_rate(folder)
        t1.append(drain(trivial_tpl, "bench4", args.runs, 1)[0])
        t8.append(drain(trivial_tpl, "bench4", args.runs, 8, "0s")[0])
        seconds, batch_sizes = drain(trivial_tpl, "bench4", args.runs, 8)
        t8g.append(seconds)
        for size, count in batch_sizes.items():
            sizes[size] = sizes.get(size, 0) + count
        raw.append((before + raw_commit_rate(folder)) / 2)
        if shm_tpl is not None:
            t8g_shm.append(drain(shm_tpl, "bench4", args.runs, 8)[0])
        steps = 4 * args.runs
        print(f"rep {rep + 1}/{reps}: io c1 {args.io_runs / io1[-1]:.1f} runs/s, c4 {args.io_runs / io4[-1]:.1f} "
              f"runs/s ({io1[-1] / io4[-1]:.2f}x); raw {raw[-1]:,.0f}/s; trivial steps/s c1 {steps / t1[-1]:,.0f}, "
              f"c8 {steps / t8[-1]:,.0f}, c8+group {steps / t8g[-1]:,.0f} ({steps / t8g[-1] / raw[-1]:.2f}x raw)",
              flush=True)
    steps = 4 * args.runs
    io_ratio = [a / b for a, b in zip(io1, io4, strict=True)]
    group_ratio = [steps / s / r for s, r in zip(t8g, raw, strict=True)]
    rows = [
        c.stat_row(f"io: concurrency 1, runs/s ({args.io_runs} runs × 4 steps × 20 ms)", [args.io_runs / s for s in io1]),
        c.stat_row("io: concurrency 4, runs/s", [args.io_runs / s for s in io4]),
        c.stat_row("**io: concurrency 4 ÷ concurrency 1 (same rep)**", io_ratio, "x"),
        c.stat_row("raw SQLite commits/s (BEGIN IMMEDIATE; INSERT; COMMIT)", raw),
        c.stat_row(f"trivial: concurrency 1, step transitions/s ({args.runs} runs × 4 steps)", [steps / s for s in t1]),
        c.stat_row("trivial: concurrency 1 ÷ raw (same rep)", [steps / s / r for s, r in zip(t1, raw, strict=True)],
                   "%"),
        c.stat_row("trivial: concurrency 8, no group commit, step transitions/s", [steps / s for s in t8]),
        c.stat_row("trivial: concurrency 8 + group commit 2 ms, step transitions/s", [steps / s for s in t8g]),
        c.stat_row("**trivial: concurrency 8 + group commit ÷ raw (same rep)**", group_ratio, "x"),
        c.stat_row("trivial: group commit ÷ concurrency 1 (same rep)", [a / b for a, b in zip(t1, t8g, strict=True)],
                   "x"),
    ]
    if t8g_shm:
        rows += [
            c.stat_row("CPU ceiling: concurrency 8 + group commit on tmpfs (fsync free), step transitions/s",
                       [steps / s for s in t8g_shm]),
            c.stat_row("CPU ceiling ÷ raw commits/s on disk (same rep)",
                       [steps / s / r for s, r in zip(t8g_shm, raw, strict=True)], "x"),
        ]
    print()
    print(c.table(c.STAT_HEADERS, rows))
    mean = sum(k * v for k, v in sizes.items()) / max(1, sum(sizes.values()))
    print(f"\ngroup commit batches, all reps: {sum(sizes.values()):,}, mean {mean:.2f} boundaries per COMMIT; "
          f"sizes {dict(sorted(sizes.items()))}")
    med = sorted(io_ratio)[len(io_ratio) // 2]
    gmed = sorted(group_ratio)[len(group_ratio) // 2]
    print(f"concurrency 4 ≥ 3.5× concurrency 1: median {med:.2f}× ({'met' if med >= 3.5 else 'MISSED'}); "
          f"group commit ≥ 1.0× raw: median {gmed:.2f}× ({'met' if gmed >= 1.0 else 'MISSED'})")
    c.save("bench_concurrency", {"io1": io1, "io4": io4, "raw": raw, "t1": t1, "t8": t8, "t8g": t8g,
                                 "batch_sizes": sizes, "runs": args.runs, "io_runs": args.io_runs, "t8g_shm": t8g_shm})
    tmp.cleanup()
    if shm is not None:
        shm.cleanup()


if __name__ == "__main__":
    main()
