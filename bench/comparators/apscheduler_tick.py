"""APScheduler 3: one scheduler wake-up over N jobs in a SQLAlchemyJobStore on SQLite, 10% due.

Runs in the bench venv. The job store's engine uses the engine's pragmas (WAL,
synchronous=FULL). A template store is built once per N in ``--workdir`` (with
synchronous=OFF, which changes only how fast it is written) and copied for every
measurement. One job in ten has ``next_run_time`` in the past (well inside its
misfire grace), the others tomorrow; the triggers are crons (00:01 and 03:00 UTC).

A wake-up is ``BaseScheduler._process_jobs``, what the scheduler thread runs when
it wakes: load the due jobs, submit each to the executor (a no-op function on a
thread pool), compute its next fire time and write it back (one transaction per
job). It is called directly on a started scheduler whose own thread is idle.
Prints one JSON line: the due wake-up, then a wake-up with nothing due.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_RUNNING
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import create_engine, event


def noop() -> None:
    return None


def sqlite_engine(path: Path, synchronous: str):  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite:///{path}")

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]
        dbapi_connection.execute("PRAGMA journal_mode = WAL")
        dbapi_connection.execute(f"PRAGMA synchronous = {synchronous}")
        dbapi_connection.execute("PRAGMA busy_timeout = 30000")

    return engine


def scheduler_on(engine):  # type: ignore[no-untyped-def]
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(engine=engine)},
        executors={"default": ThreadPoolExecutor(10)},
        job_defaults={"misfire_grace_time": 24 * 3600, "coalesce": True, "max_instances": 1},
        timezone=UTC)
    scheduler.start(paused=True)  # jobs go straight to the store; the scheduler thread stays idle
    return scheduler


def build_template(path: Path, jobs: int) -> None:
    engine = sqlite_engine(path, "OFF")
    scheduler = scheduler_on(engine)
    now = datetime.now(UTC)
    for i in range(jobs):
        due = i % 10 == 0
        trigger = CronTrigger(hour=0, minute=1, timezone=UTC) if due else \
            CronTrigger(hour=3, minute=0, timezone=UTC)
        scheduler.add_job(noop, trigger, id=f"s{i:05d}",
                          next_run_time=now - timedelta(seconds=1) if due else now + timedelta(days=1))
    # No shutdown: it would leave the paused state and let the scheduler thread process the due jobs.
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    template = args.workdir / f"aps-template-{args.jobs}.db"
    if not template.exists():
        build_template(template, args.jobs)
    work = args.workdir / f"aps-{args.jobs}.db"
    shutil.copyfile(template, work)
    engine = sqlite_engine(work, "FULL")
    scheduler = scheduler_on(engine)
    jobstore = scheduler._lookup_jobstore("default")
    jobstore.get_next_run_time()  # warm the connection, as the engine side does
    time.sleep(0.2)  # let the scheduler thread settle into its (paused) wait before we flip the state
    scheduler.state = STATE_RUNNING  # running, but its thread waits until woken: we wake it by hand
    dispatched = []
    scheduler.add_listener(lambda ev: dispatched.append(ev.job_id), mask=2 ** 15)  # EVENT_JOB_SUBMITTED
    start = time.perf_counter()
    scheduler._process_jobs()
    due_s = time.perf_counter() - start
    start = time.perf_counter()
    scheduler._process_jobs()
    quiet_s = time.perf_counter() - start
    with engine.connect() as conn:
        pragmas = [conn.exec_driver_sql("PRAGMA journal_mode").scalar(),
                   conn.exec_driver_sql("PRAGMA synchronous").scalar()]
    scheduler.shutdown(wait=True)
    engine.dispose()
    work.unlink()
    import apscheduler
    print(json.dumps({"jobs": args.jobs, "due_s": due_s, "quiet_s": quiet_s, "dispatched": len(dispatched),
                      "pragmas": pragmas, "apscheduler": apscheduler.__version__}))


if __name__ == "__main__":
    main()
