"""Races: 4 ``tick`` and 3 ``work`` processes at once, round after round, over three simulated days (SPEC §10.1-10.3).

Four simulated weeks with ``--long``. Three days is the least that holds what the
test must show: rounds of every gap size, and the 30-hour outage that outlasts one
schedule's 1-day catch-up window (a ``too_old`` range) with rounds after it.

Seven 15-minute schedules (four ``four_steps`` ones that log every step
execution to a file, three ``echo`` ones) with every misfire and overlap
policy. Each round advances the simulated time by a seeded 3-12 hours (one
round jumps 30 hours: a scheduler outage longer than one schedule's 1-day
catch-up window) and starts the seven processes at once on one shared
``--now T@E`` clock; a last round drains what is left. Run on SQLite and on
PostgreSQL.

Then: every slot since the schedules were applied is exactly one row at
revision 1 (a run, MISSED, SKIPPED or MANUAL_REQUIRED) or lies in a
``too_old`` audit range, and no slot before them has a row; the side-effect
log shows every step of every ``four_steps`` run started and ended exactly
once, all by one process.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from engine.store import locks
from engine.store.tables import audit_events, runs, schedules
from tests.acceptance import procs
from tests.support import write_config

pytestmark = pytest.mark.slow

APPLIED_AT = datetime(2026, 6, 2, 0, 3, tzinfo=UTC)  # four weeks (--long) without a DST change in these zones
WEEK = timedelta(days=7)
TICKS, WORKERS = 4, 3

SCHEDULES: list[dict[str, Any]] = [
    dict(name="f-utc", workflow="four_steps", project="p1", cron="*/15 * * * *", timezone="UTC",
         misfire="CATCH_UP_ALL", overlap="ALLOW"),
    dict(name="f-seoul", workflow="four_steps", project="p2", cron="*/15 * * * *", timezone="Asia/Seoul",
         misfire="CATCH_UP_ALL", overlap="BUFFER_ONE"),
    dict(name="f-ny", workflow="four_steps", project="p3", cron="*/15 * * * *", timezone="America/New_York",
         misfire="RUN_ONCE", overlap="SKIP_NEW"),
    dict(name="f-london", workflow="four_steps", project="p4", cron="*/15 * * * *", timezone="Europe/London",
         misfire="CATCH_UP_ALL", overlap="SKIP_NEW", catchup_window="1d"),
    dict(name="e-skip", workflow="echo", project="p5", cron="*/15 * * * *", timezone="UTC",
         misfire="SKIP", overlap="ALLOW"),
    dict(name="e-manual", workflow="echo", project="p6", cron="*/15 * * * *", timezone="Asia/Seoul",
         misfire="MANUAL", overlap="ALLOW"),
    dict(name="e-offset", workflow="echo", project="p7", cron="7,22,37,52 * * * *", timezone="Europe/London",
         misfire="CATCH_UP_ALL", overlap="QUEUE_NEW"),
]
OFFSET_MINUTE = {"e-offset": 7}  # every other schedule fires at :00, :15, :30, :45 (all zones here: whole hours)


def rounds(seed: int, span: timedelta) -> list[timedelta]:
    """Cumulative offsets of each round from APPLIED_AT: 3-12 h apart, the fourth 30 h after the third."""
    rng = random.Random(f"{seed}:races")
    offsets: list[timedelta] = []
    at = timedelta(0)
    while at < span:
        at += timedelta(hours=30) if len(offsets) == 3 else timedelta(minutes=rng.randint(180, 720))
        offsets.append(min(at, span))
    return offsets


def expected_slots(name: str, first: datetime, end: datetime) -> list[datetime]:
    """Every 15-minute slot of ``name`` with first <= slot < end, computed without the engine's cron."""
    minute = OFFSET_MINUTE.get(name, 0)
    at = first.replace(minute=minute, second=0, microsecond=0)
    while at < first:
        at += timedelta(minutes=15)
    found = []
    while at < end:
        found.append(at)
        at += timedelta(minutes=15)
    return found


def run_round(tmp: Path, config: Path, now: str, number: int, *, ticks: int, workers: int) -> None:
    """Start ``ticks`` tick and ``workers`` work processes at once; each must exit 0 (stderr kept in logs/)."""
    (tmp / "logs").mkdir(exist_ok=True)
    commands = [["tick"]] * ticks + [["work", "--until-idle"]] * workers
    names = [f"logs/r{number:02d}-{args[0]}{n}.log" for n, args in enumerate(commands)]
    started = [(procs.spawn(tmp, config, *args, now=now, log_name=name), tmp / name, args)
               for args, name in zip(commands, names)]
    for proc, log, args in started:
        proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{args} exited {proc.returncode}: {log.read_text()[-4000:]}"


def test_racing_ticks_and_workers(store_url: str, tmp_path: Path, long_run: bool, seed: int) -> None:
    span = 4 * WEEK if long_run else timedelta(days=2)
    log = tmp_path / "steps.log"
    config = write_config(tmp_path / "reportflow.toml", db_url=store_url,
                          sections={"worker": {"lease": "60s", "poll_interval": "0.2s"},
                                    "testflow": {"log": str(log)}}, schedules=SCHEDULES)
    applied = procs.run(tmp_path, config, "schedules", "apply", now=procs.Shared(APPLIED_AT).at())
    assert applied.returncode == 0, applied.stderr
    offsets = rounds(seed, span)
    for number, offset in enumerate(offsets):
        run_round(tmp_path, config, procs.Shared(APPLIED_AT + offset).at(), number, ticks=TICKS, workers=WORKERS)
    end = APPLIED_AT + offsets[-1]
    drain = len(offsets)
    run_round(tmp_path, config, procs.Shared(end + timedelta(minutes=5)).at(), drain, ticks=0, workers=WORKERS)
    run_round(tmp_path, config, procs.Shared(end + timedelta(minutes=6)).at(), drain + 1, ticks=0, workers=1)

    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            sched = {row.id: row for row in conn.execute(select(schedules))}
            rows = conn.execute(select(runs.c.id, runs.c.schedule_id, runs.c.scheduled_for, runs.c.trigger_type,
                                       runs.c.revision, runs.c.status, runs.c.workflow, runs.c.attempt_count)).all()
            too_old = conn.execute(select(audit_events.c.schedule_id, audit_events.c.after)
                                   .where(audit_events.c.action == "slots_too_old")).all()
    finally:
        engine.dispose()
    context = f"seed {seed}, {len(offsets)} rounds ending {end.isoformat()}"

    # §10.1: one row per (schedule, slot, trigger) at revision 1.
    per_slot = Counter((r.schedule_id, _utc(r.scheduled_for), r.trigger_type) for r in rows if r.revision == 1)
    doubles = {k: n for k, n in per_slot.items() if n > 1}
    assert not doubles, f"{context}: slots with more than one row: {list(doubles.items())[:5]}"

    # §10.2: every slot since the schedule was applied is a row, or inside a too_old audit range.
    ranges: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    for schedule_id, after in too_old:
        ranges[schedule_id].append((_parse(after["from"]), _parse(after["to"])))
    by_schedule: dict[int, set[datetime]] = defaultdict(set)
    for r in rows:
        by_schedule[r.schedule_id].add(_utc(r.scheduled_for))
    statuses: Counter[str] = Counter(r.status for r in rows)
    for schedule_id, schedule in sched.items():
        name = schedule.name
        wanted = expected_slots(name, APPLIED_AT, _utc(schedule.next_run_at))
        assert _utc(schedule.next_run_at) > end - timedelta(minutes=15), f"{context}: {name} fell behind"
        have = by_schedule[schedule_id]
        unaccounted = [s for s in wanted if s not in have
                       and not any(lo <= s < hi for lo, hi in ranges[schedule_id])]
        assert not unaccounted, f"{context}: {name} lost {len(unaccounted)} slots, first {unaccounted[:3]}"
        extra = sorted(have - set(wanted))
        assert not extra, f"{context}: {name} has rows for slots that are not its own: {extra[:3]}"
        # The 30 h outage is longer than f-london's 1-day catch-up window only: one too_old range, there.
        assert len(ranges[schedule_id]) == (1 if name == "f-london" else 0), f"{context}: {name} {ranges}"

    # Nothing left behind: every row is in a final state or waits for a person.
    assert set(statuses) <= {"SUCCESS", "MISSED", "SKIPPED", "MANUAL_REQUIRED"}, f"{context}: {statuses}"

    # No run executed twice: the side-effect log has one start and one end per step, all by one process.
    lines = [line.split() for line in log.read_text().splitlines()]
    starts = Counter((line[1], line[2]) for line in lines if line[0] == "start")
    ends = Counter((line[1], line[2]) for line in lines if line[0] == "end")
    assert set(starts.values()) == {1} and set(ends.values()) == {1}, (
        f"{context}: re-executed steps {[k for k, n in (starts + ends).items() if n > 2][:5]}")
    pids: dict[str, set[str]] = defaultdict(set)
    for line in lines:
        pids[line[1]].add(line[3])
    assert all(len(p) == 1 for p in pids.values()), f"{context}: a run executed by two processes"
    executed = {r.id for r in rows if r.workflow == "four_steps" and r.status == "SUCCESS"}
    assert {int(run_id) for run_id, step in ends if step == "FOUR"} == executed
    assert all(r.attempt_count == 1 for r in rows if r.status == "SUCCESS")
    print(f"\nraces ({store_url.split(':')[0]}): {len(offsets) + 2} rounds of {TICKS} ticks + {WORKERS} workers, "
          f"{len(rows)} rows {dict(statuses)}, {len(executed)} four_steps runs executed once each, "
          f"{sum(len(v) for v in ranges.values())} too_old range(s); {context}")


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.mark.postgres
def test_two_workers_finishing_runs_of_one_schedule_at_the_same_instant_both_succeed(pg_url: str,
                                                                                     tmp_path: Path) -> None:
    """Regression for a PostgreSQL deadlock this suite found (fixed in af0897f: an advisory lock per schedule).

    The release transaction updates the run row twice (``hold_run``, then
    ``release_run``); the second UPDATE of a row version the transaction made
    itself fires the runs.schedule_id foreign-key check, which takes FOR KEY
    SHARE on the schedule row. ``promote_pending`` then asked for FOR UPDATE on
    that row, which conflicts with another releasing worker's KEY SHARE: each
    waited for the other, PostgreSQL aborted one (``deadlock detected``) and
    that worker process died with its run left RUNNING. The racing-processes
    test above hit it by chance; here a barrier (an event hook on this test's
    own engine) holds each worker just before the schedule lock of its
    promotion until both are there, which made it certain (it fails on the
    code before af0897f).
    """
    import threading

    from sqlalchemy import event

    from engine.core.clock import ManualClock
    from engine.execution.worker import Worker
    from engine.plugins.workflow_registry import load_registry
    from engine.scheduling import definitions, tick
    from tests.flows.testflows import FOUR_STEPS
    from tests.support import make_runtime

    spec = dict(name="two", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
                misfire="CATCH_UP_ALL", overlap="ALLOW")
    rt = make_runtime(pg_url, schedules=[spec], clock=ManualClock(APPLIED_AT),
                      registry={**load_registry(), "four_steps": FOUR_STEPS},
                      extra={"testflow": {"log": str(tmp_path / "steps.log")}})
    try:
        definitions.apply(rt)
        rt.clock.set(APPLIED_AT + timedelta(hours=2, minutes=1))
        assert tick.tick(rt).runs_created == 2
        barrier = threading.Barrier(2, timeout=20)
        met: list[str] = []

        @event.listens_for(rt.store.engine, "before_cursor_execute")
        def meet_at_the_schedule_lock(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
            # The promotion's two-key advisory lock on the schedule (not the claim, whose held-run rule
            # also reads schedules, nor a family's lock, which shares the statement's shape).
            if statement.startswith("SELECT pg_advisory_xact_lock(%(space)s") and \
                    isinstance(parameters, dict) and parameters.get("space") == locks.SCHEDULE_SPACE:
                met.append(statement)
                try:
                    barrier.wait()
                except threading.BrokenBarrierError:
                    pass

        failures: list[BaseException] = []

        def work(worker_id: str) -> None:
            try:
                outcome = Worker(rt, worker_id).run_one()
                assert outcome is not None and outcome.status.value == "SUCCESS", outcome
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(name,)) for name in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not failures, f"a worker died finishing its run: {failures[0]!r}"[:1500]
        assert len(met) == 2, "the hook no longer sees the promotion's schedule lock: update it to the new statement"
    finally:
        rt.store.dispose()
