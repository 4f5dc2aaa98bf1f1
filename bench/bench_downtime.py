"""The first tick after long downtime: bounded by the 7-day catch-up window (SPEC §3.2).

Two cases, each from a fresh copy of an applied database per repetition:

* one ``echo`` schedule, ``* * * * *`` (``allow_frequent``), applied, then a tick one
  year later (target < 1 s, rows bounded by the window: 7 × 1,440 = 10,080);
* 1,000 daily ``echo`` schedules (``30 19 * * *``), then a tick 30 days later
  (7 runs each, plus one ``too_old`` audit event for the other 23 days).

Schedules keep the defaults: misfire ``CATCH_UP_ALL``, overlap ``QUEUE_NEW``, so a
catch-up is one ``QUEUED`` run per schedule and ``PENDING`` ones behind it.
Only the tick is timed.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _common as c
from sqlalchemy import func, select

from engine.core.clock import ManualClock
from engine.scheduling import definitions, tick
from engine.store.tables import audit_events, runs
from tests.support import make_runtime
from workflows import echo

T0 = datetime(2025, 9, 29, 0, 0, 30, tzinfo=UTC)
REGISTRY = {"echo": echo.WORKFLOW}
CASES = {
    "minute": ([dict(name="every-minute", workflow="echo", project="p", cron="* * * * *", timezone="UTC",
                     allow_frequent=True)], timedelta(days=365)),
    "daily1000": ([dict(name=f"d{i:04d}", workflow="echo", project=f"p{i:04d}", cron="30 19 * * *",
                        timezone=["UTC", "Asia/Seoul", "America/New_York", "Europe/Berlin"][i % 4])
                   for i in range(1000)], timedelta(days=30)),
}


def build_template(folder: Path, case: str) -> Path:
    path = folder / f"{case}.db"
    configs, _ = CASES[case]
    rt = make_runtime(f"sqlite:///{path}", schedules=configs, clock=ManualClock(T0), registry=REGISTRY)
    definitions.apply(rt)
    rt.store.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def tick_after_downtime(template: Path, case: str) -> tuple[float, dict[str, object]]:
    _, down = CASES[case]
    copy = template.with_name(f"{case}-run.db")
    shutil.copyfile(template, copy)
    rt = make_runtime(f"sqlite:///{copy}", clock=ManualClock(T0 + down), registry=REGISTRY)
    with rt.store.read() as conn:
        conn.exec_driver_sql("SELECT 1")  # connection opened before timing
    seconds, report = c.timed(lambda: tick.tick(rt))
    with rt.store.read() as conn:
        rows = conn.execute(select(func.count()).select_from(runs)).scalar_one()
        statuses = Counter(dict(conn.execute(select(runs.c.status, func.count()).group_by(runs.c.status)).all()))
        too_old = conn.execute(select(func.count()).select_from(audit_events)
                               .where(audit_events.c.action == "slots_too_old")).scalar_one()
    rt.store.dispose()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    return seconds, {"rows": rows, "statuses": dict(statuses), "too_old_events": too_old,
                     "too_old_slots": report.too_old_slots, "created": report.runs_created}


def main() -> None:
    args = c.parser(__doc__.splitlines()[0]).parse_args()
    reps = c.check_reps(args.reps)
    c.announce("bench_downtime.py")
    rows, payload = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-downtime-") as tmp:
        for case, label in (("minute", "1 minute schedule, 1 year down"),
                            ("daily1000", "1,000 daily schedules, 30 days down")):
            template = build_template(Path(tmp), case)
            times, facts = [], {}
            for _ in range(reps):
                seconds, facts = tick_after_downtime(template, case)
                times.append(seconds)
            rows.append([*c.stat_row(f"tick: {label}", times, "s"), f"{facts['rows']:,}",
                         f"{facts['too_old_slots']:,}", str(facts["statuses"])])
            payload[case] = {"seconds": times, **facts}
            print(f"{label}: median {sorted(times)[reps // 2]:.3f} s, {facts}", flush=True)
    print()
    print(c.table([*c.STAT_HEADERS, "run rows", "too_old slots (audited)", "statuses"], rows))
    c.save("bench_downtime", payload)


if __name__ == "__main__":
    main()
