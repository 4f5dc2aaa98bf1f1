"""Steps recorded per second on PostgreSQL: trivial 4-step runs, one process, against raw single-row commits.

Per repetition, side by side, on the local server as installed (``synchronous_commit = on``):

1. raw: ``INSERT one row; COMMIT`` through psycopg, measured right before and right after the
   engine pass (their mean is the rep's raw rate);
2. engine: ``--runs`` QUEUED runs of ``bench_steps``'s no-op 4-step workflow on a fresh copy
   (``CREATE DATABASE … TEMPLATE``) of a database a tick filled once, each claimed and driven
   to SUCCESS by ``Worker.run_one``; threaded steps, then the same declared ``inline``.

The ratio is the SQLite bench's (``bench_steps``): step transitions/s ÷ raw commits/s.
"""

from __future__ import annotations

from datetime import timedelta

import _common as c
import psycopg
from bench_steps import BENCH4, BENCH4_INLINE, SCHEDULE, T0, drain
from bench_workers import Databases

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.scheduling import definitions, tick
from tests.support import make_runtime

RAW_COMMITS = 1000


def raw_commit_rate(url: str, commits: int = RAW_COMMITS) -> float:
    """Durable single-row transactions per second on the same server."""
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS raw_t (id bigserial PRIMARY KEY, v text NOT NULL)")
        conn.commit()

        def run() -> None:
            for _ in range(commits):
                conn.execute("INSERT INTO raw_t (v) VALUES (%s)", ("x",))
                conn.commit()

        seconds, _ = c.timed(run)
    return commits / seconds


def fill_template(dbs: Databases, runs: int) -> None:
    """The template database with ``runs`` QUEUED bench4 runs, made by a tick (not timed)."""
    clock = ManualClock(T0)
    rt = make_runtime(c.PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + dbs.template, schedules=[SCHEDULE], clock=clock,
                      registry={"bench4": BENCH4})
    definitions.apply(rt)
    clock.advance(timedelta(minutes=runs))
    assert tick.tick(rt).created == {RunStatus.QUEUED.value: runs}
    rt.store.dispose()


def engine_pass(dbs: Databases, runs: int, inline: bool) -> tuple[float, float]:
    """(seconds for the engine to drain ``runs`` runs, raw commits/s around it) on one fresh database."""
    url = dbs.fresh()
    rt = make_runtime(url, schedules=[SCHEDULE], clock=ManualClock(T0 + timedelta(minutes=runs)),
                      registry={"bench4": BENCH4_INLINE if inline else BENCH4})
    before = raw_commit_rate(url)
    seconds, done = c.timed(lambda: drain(rt))
    after = raw_commit_rate(url)
    assert done == runs
    rt.store.dispose()
    return seconds, (before + after) / 2


def main() -> None:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=500)
    args = p.parse_args()
    reps = c.check_reps(args.reps)
    c.announce("bench_steps_pg.py")
    dbs = Databases()
    threaded: list[tuple[float, float]] = []
    inline: list[tuple[float, float]] = []
    try:
        fill_template(dbs, args.runs)
        for rep in range(reps):
            threaded.append(engine_pass(dbs, args.runs, inline=False))
            inline.append(engine_pass(dbs, args.runs, inline=True))
            print(f"rep {rep + 1}/{reps}: raw {threaded[-1][1]:,.0f} commits/s, engine "
                  f"{4 * args.runs / threaded[-1][0]:,.0f} steps/s, inline {4 * args.runs / inline[-1][0]:,.0f} steps/s",
                  flush=True)
    finally:
        dbs.drop_all()
    steps = 4 * args.runs
    rows = [c.stat_row("raw PostgreSQL commits/s (INSERT; COMMIT)", [r for _, r in threaded]),
            c.stat_row("engine step transitions/s", [steps / s for s, _ in threaded]),
            c.stat_row("engine steps/s ÷ raw commits/s (same pass)", [steps / s / r for s, r in threaded], "%"),
            c.stat_row("engine, steps declared inline: step transitions/s", [steps / s for s, _ in inline]),
            c.stat_row("engine inline steps/s ÷ raw commits/s (same pass)", [steps / s / r for s, r in inline], "%")]
    print()
    print(c.table(c.STAT_HEADERS, rows))
    c.save("bench_steps_pg", {"runs": args.runs, "threaded": threaded, "inline": inline})


if __name__ == "__main__":
    main()
