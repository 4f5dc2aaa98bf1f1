"""``reportflow serve`` start delay (started_at − scheduled_for), SQLite, the real CLI process.

Slots are real-time minutes, so 100 slots of one schedule take 100 minutes. Instead,
every serve session is started with a clock anchored ``--lead`` seconds before a
minute boundary (``--now T@E``, ``tests/acceptance/procs.py``): the slot arrives a
few seconds after the process is up, then the session is stopped with SIGTERM.
Sessions follow each other on one database, each one minute later in simulated
time, so nothing is ever caught up. Two measurements:

* single: ``--single`` sessions (default 100) of ONE ``echo`` schedule (``* * * * *``,
  ``allow_frequent``): one slot each, so 100 independent start delays. This is the
  delay the target speaks of: serve sleeping until the slot, ticking, claiming.
* burst: ``--reps`` sessions (≥ 5) of 100 ``echo`` schedules whose slots coincide:
  one tick creates 100 runs, then one worker drains them in order, so the delay of
  the k-th run includes the k−1 runs before it (queueing, not wake-up latency).

A session counts only if ``serve_started`` was logged before the slot (start-up is
never in a delay). Targets (SPEC §11): p50 < 100 ms, p99 < 1 s.
"""

from __future__ import annotations

import signal
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _common as c

from engine.core.clock import ManualClock
from engine.scheduling import definitions
from tests.acceptance import procs
from tests.support import make_runtime, write_config
from workflows import echo

BASE = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)  # the first session's slot
REGISTRY = {"echo": echo.WORKFLOW}


def schedule_configs(count: int) -> list[dict[str, object]]:
    return [dict(name=f"e{i:03d}", workflow="echo", project=f"p{i:03d}", cron="* * * * *", timezone="UTC",
                 allow_frequent=True) for i in range(count)]


def prepare(folder: Path, count: int, concurrency: int = 1) -> Path:
    """A database with ``count`` applied schedules and the config the serve process reads."""
    url = f"sqlite:///{folder / 'rf.db'}"
    configs = schedule_configs(count)
    rt = make_runtime(url, schedules=configs, clock=ManualClock(BASE - timedelta(seconds=30)), registry=REGISTRY)
    definitions.apply(rt)
    rt.store.dispose()
    return write_config(folder / "reportflow.toml", db_url=url, schedules=configs,
                        sections={"worker": {"poll_interval": "1s", "concurrency": concurrency}})


def delays_for(db: Path, slot: datetime) -> list[float]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT scheduled_for, started_at FROM runs WHERE scheduled_for = ? "
                            "AND status = 'SUCCESS'", (slot.strftime("%Y-%m-%d %H:%M:%S.%f"),)).fetchall()
    parse = datetime.fromisoformat
    return [(parse(started) - parse(scheduled)).total_seconds() for scheduled, started in rows]


def session(folder: Path, config: Path, slot: datetime, expected: int, lead_s: float) -> list[float] | None:
    """One serve process whose clock reaches ``slot`` ``lead_s`` seconds after it is spawned."""
    log = f"serve-{slot:%H%M}.log"
    clock = procs.Shared(slot - timedelta(seconds=lead_s))
    slot_real = clock.anchor + lead_s
    proc = procs.spawn(folder, config, "serve", "--worker-id", "bench-serve", now=clock.at(), log_name=log)
    try:
        procs.wait_for(lambda: "serve_started" in (folder / log).read_text(), timeout=60, what="serve_started")
        started_in_time = time.time() < slot_real
        procs.wait_for(lambda: len(delays_for(folder / "rf.db", slot)) == expected, timeout=120,
                       what=f"{expected} runs of {slot:%H:%M} to succeed")
    except AssertionError:
        c.OUT_DIR.mkdir(parents=True, exist_ok=True)
        kept = c.OUT_DIR / f"bench_serve_failure_{slot:%H%M}.log"
        kept.write_text((folder / log).read_text())
        with sqlite3.connect(folder / "rf.db") as conn:
            recent = conn.execute("SELECT id, scheduled_for, status, started_at, error_code FROM runs "
                                  "ORDER BY id DESC LIMIT 3").fetchall()
        raise AssertionError(f"session for {slot:%H:%M} did not finish; serve log kept in {kept}; "
                             f"latest runs: {recent}") from None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    if proc.returncode != 0:
        raise RuntimeError((folder / log).read_text()[-3000:])
    return delays_for(folder / "rf.db", slot) if started_in_time else None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--single", type=int, default=100, help="single-slot sessions (samples)")
    p.add_argument("--burst", type=int, default=100, help="schedules whose slots coincide in a burst session")
    p.add_argument("--burst-concurrency", default="1,8",
                   help="[worker] concurrency values compared side by side in the burst sessions")
    p.add_argument("--lead", type=float, default=3.0, help="seconds between spawning serve and the slot")
    args = p.parse_args()
    reps = c.check_reps(args.reps)
    c.announce("bench_serve.py")
    payload: dict[str, object] = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        folder = Path(tmp) / "single"
        folder.mkdir()
        config = prepare(folder, 1)
        single: list[float] = []
        skipped = 0
        minute = 0
        while len(single) < args.single:
            got = session(folder, config, BASE + timedelta(minutes=minute), 1, args.lead)
            minute += 1
            if got is None:
                skipped += 1
                continue
            single.extend(got)
            if len(single) % 10 == 0:
                print(f"single: {len(single)}/{args.single}, median so far {statistics.median(single) * 1000:.1f} ms",
                      flush=True)
        if single:
            rows.append([f"single slot ({len(single)} sessions)", f"{percentile(single, 0.5) * 1000:.1f} ms",
                         f"{percentile(single, 0.99) * 1000:.1f} ms", f"{min(single) * 1000:.1f} ms",
                         f"{max(single) * 1000:.1f} ms"])
        payload["single"] = {"delays_s": single, "late_start_sessions_skipped": skipped}

        levels = [int(v) for v in args.burst_concurrency.split(",")]
        configs = {}
        for level in levels:  # one database per concurrency level; their sessions alternate within each rep
            folder = Path(tmp) / f"burst-c{level}"
            folder.mkdir()
            configs[level] = (folder, prepare(folder, args.burst, level))
        burst_p50: dict[int, list[float]] = {level: [] for level in levels}
        burst_p99: dict[int, list[float]] = {level: [] for level in levels}
        burst_all: dict[int, list[float]] = {level: [] for level in levels}
        for rep in range(reps):
            for level in levels:
                folder, config = configs[level]
                got = None
                while got is None:
                    got = session(folder, config, BASE + timedelta(minutes=rep * 2), args.burst, args.lead)
                burst_p50[level].append(percentile(got, 0.5))
                burst_p99[level].append(percentile(got, 0.99))
                burst_all[level].extend(got)
                print(f"burst {rep + 1}/{reps}, concurrency {level}: p50 {burst_p50[level][-1] * 1000:.0f} ms, "
                      f"p99 {burst_p99[level][-1] * 1000:.0f} ms", flush=True)
        for level in levels:
            every = burst_all[level]
            rows.append([f"burst of {args.burst} coinciding slots, concurrency {level}, all {len(every)} runs of "
                         f"{reps} sessions", f"{percentile(every, 0.5) * 1000:.0f} ms",
                         f"{percentile(every, 0.99) * 1000:.0f} ms", f"{min(every) * 1000:.0f} ms",
                         f"{max(every) * 1000:.0f} ms"])
        payload["burst"] = {str(level): {"p50_s": burst_p50[level], "p99_s": burst_p99[level],
                                         "delays_s": burst_all[level]} for level in levels}
    print()
    print(c.table(["start delay (started_at − scheduled_for)", "p50", "p99", "min", "max"], rows))
    print()
    stat_rows = []
    for level in levels:
        stat_rows += [c.stat_row(f"concurrency {level}: p50", burst_p50[level], "ms"),
                      c.stat_row(f"concurrency {level}: p99", burst_p99[level], "ms")]
    print(c.table(["burst, per session", "min", "median", "max", "reps"], stat_rows))
    print(f"\nsingle-slot sessions skipped because serve was not up {args.lead:g} s after spawn: {skipped}")
    c.save("bench_serve", payload)


if __name__ == "__main__":
    main()
