"""One ``reportflow work --until-idle`` process on 864 one-step ``echo`` runs, process start included.

The runs: a 5-minute ``echo`` schedule backfilled over 3 days (3 × 288 = 864
BACKFILL runs), made in-process on a template database (not timed). Per
repetition, side by side, each on a fresh copy of the template (SQLite, WAL,
``synchronous=FULL``): the raw single-row commit rate (``bench_steps``'
``BEGIN IMMEDIATE; INSERT; COMMIT``, before and after), then the wall time of
``python -m engine.cli work --until-idle`` from spawn to exit, (a) with the
defaults (concurrency 1, ``backfill_concurrency`` 1) and (b) with
``--concurrency 8`` and ``backfill_concurrency = 8``; and, for reference, the
start-up alone: ``python -m engine.cli --help`` (there is no ``--version`` yet) and ``python -c "import
sqlalchemy"``, and the same ``work --until-idle`` once more on the drained copy, where
nothing is claimable (the command's own start-up). From that and the raw rate, two ceilings:
the ratio if each run cost nothing but its two commits at the raw rate (concurrency 1: a claim
and a finish), and if it cost nothing at all. Every pass must leave 864 SUCCESS runs.
Target (SPEC §11): runs/s ≥ 0.25× the raw commit rate.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
from datetime import UTC, date, datetime
from pathlib import Path

import _common as c
from bench_steps import copy_of, raw_commit_rate

from engine.core.clock import ManualClock
from engine.operations import actions
from engine.scheduling import definitions
from tests.support import REPO_ROOT, make_runtime, write_config

NOW = datetime(2026, 9, 29, 0, 1, tzinfo=UTC)
NOW_ARG = "2026-09-29T00:01:00Z"
RUNS = 864
SCHEDULE = dict(name="echo5", workflow="echo", project="bench", cron="*/5 * * * *", timezone="UTC",
                allow_frequent=True, overlap="ALLOW", misfire="CATCH_UP_ALL")


def template(folder: Path) -> Path:
    path = folder / "template.db"
    rt = make_runtime(f"sqlite:///{path}", schedules=[SCHEDULE], clock=ManualClock(NOW))
    definitions.apply(rt)
    report = actions.backfill(rt, "echo5", first=date(2026, 9, 26), last=date(2026, 9, 28))
    assert len(report.created) == RUNS, len(report.created)
    rt.store.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def work(tpl: Path, folder: Path, *args: str, worker: dict[str, object] | None = None) -> float:
    """Seconds for one ``work --until-idle`` process to drain a fresh copy of the template."""
    return work_on(copy_of(tpl, "engine.db"), folder, *args, worker=worker, expect=RUNS)


def work_on(db: Path, folder: Path, *args: str, worker: dict[str, object] | None = None, expect: int) -> float:
    """Seconds for one ``work --until-idle`` process on ``db``; ``expect`` SUCCESS runs there afterwards."""
    config = write_config(folder / "reportflow.toml", db_url=f"sqlite:///{db}", sections={"worker": worker or {}},
                          schedules=[SCHEDULE])
    cmd = [sys.executable, "-m", "engine.cli", "--config", str(config), "--now", NOW_ARG, "work", "--until-idle",
           *args]
    seconds, proc = c.timed(lambda: subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True))
    assert proc.returncode == 0, proc.stderr[-2000:]
    with sqlite3.connect(db) as conn:
        done = conn.execute("SELECT count(*) FROM runs WHERE status = 'SUCCESS'").fetchone()[0]
    assert done == expect, (done, proc.stderr[-2000:])
    return seconds


def startup(*cmd: str) -> float:
    seconds, proc = c.timed(lambda: subprocess.run([sys.executable, *cmd], cwd=REPO_ROOT, capture_output=True))
    assert proc.returncode == 0
    return seconds


def main() -> None:
    p = c.parser(__doc__.splitlines()[0])
    reps = c.check_reps(p.parse_args().reps)
    c.announce("bench_until_idle.py")
    tmp = tempfile.TemporaryDirectory(prefix="bench-idle-")
    folder = Path(tmp.name)
    tpl = template(folder)
    raw, one, eight, version, sqla, empty = [], [], [], [], [], []
    for rep in range(reps):
        before = raw_commit_rate(folder)
        one.append(work(tpl, folder))
        eight.append(work(tpl, folder, "--concurrency", "8", worker={"backfill_concurrency": 8}))
        raw.append((before + raw_commit_rate(folder)) / 2)
        # The same command with nothing to claim (the drained copy): what start-up alone costs it.
        empty.append(work_on(folder / "engine.db", folder, worker={"backfill_concurrency": 8}, expect=RUNS))
        version.append(startup("-m", "engine.cli", "--help"))
        sqla.append(startup("-c", "import sqlalchemy"))
        print(f"rep {rep + 1}/{reps}: raw {raw[-1]:,.0f}/s; default {RUNS / one[-1]:,.0f} runs/s "
              f"({RUNS / one[-1] / raw[-1]:.3f}x raw); concurrency 8 {RUNS / eight[-1]:,.0f} runs/s "
              f"({RUNS / eight[-1] / raw[-1]:.3f}x raw); --help {version[-1]:.3f} s", flush=True)
    rows = [
        c.stat_row("raw SQLite commits/s (BEGIN IMMEDIATE; INSERT; COMMIT)", raw),
        c.stat_row(f"work --until-idle, defaults: seconds for {RUNS} runs, start included", one, "s"),
        c.stat_row("work --until-idle, defaults: runs/s", [RUNS / s for s in one]),
        c.stat_row("**defaults: runs/s ÷ raw commits/s (same rep)**", [RUNS / s / r for s, r in zip(one, raw)], "x"),
        c.stat_row("work --until-idle --concurrency 8, backfill_concurrency 8: runs/s", [RUNS / s for s in eight]),
        c.stat_row("concurrency 8: runs/s ÷ raw commits/s (same rep)", [RUNS / s / r for s, r in zip(eight, raw)],
                   "x"),
        c.stat_row("process start: python -m engine.cli --help", version, "s"),
        c.stat_row('process start: python -c "import sqlalchemy"', sqla, "s"),
        c.stat_row("process start: work --until-idle with nothing to claim", empty, "s"),
        # Ceilings: what the ratio would be if each run cost only its two commits at the raw rate
        # (concurrency 1: a claim and a finish), or nothing at all (every commit shared and free).
        c.stat_row("ceiling, start + 2 raw commits per run and nothing else: runs/s ÷ raw",
                   [RUNS / (e + 2 * RUNS / r) / r for e, r in zip(empty, raw)], "x"),
        c.stat_row("ceiling, start and nothing else: runs/s ÷ raw", [RUNS / e / r for e, r in zip(empty, raw)], "x"),
    ]
    print()
    print(c.table(c.STAT_HEADERS, rows))
    ratio = sorted(RUNS / s / r for s, r in zip(one, raw))[len(one) // 2]
    print(f"\ntarget runs/s ≥ 0.25× raw: defaults median {ratio:.3f}× ({'met' if ratio >= 0.25 else 'MISSED'})")
    c.save("bench_until_idle", {"raw": raw, "one": one, "eight": eight, "version": version, "sqlalchemy": sqla,
                                "empty": empty})
    tmp.cleanup()


if __name__ == "__main__":
    main()
