"""Soak: 200 schedules in 6 zones across DST transitions, `serve` nodes killed at random, a simulated month.

By default, the least that shows it: nine simulated days (2026-03-28 to 04-06)
hold Berlin's spring gap on 29 March and Sydney's autumn fold on 5 April, in
about five rounds, each with a node SIGKILLed. A simulated year of 2026 with
``--long`` (every transition of the five zones that have any, a kill in four
rounds of five). The clock has no speed
factor, so time runs fast by steps: each round starts the nodes (three
``serve`` processes on PostgreSQL, two on SQLite) at the next simulated
instant (6-30 h later, seeded) on a shared ``--now T@E`` clock, lets them tick,
work and reconcile until nothing is left to do, and stops them with SIGTERM.
During a round a node is SIGKILLed at a seeded random instant and restarted at
once with the same ``--worker-id`` (as systemd would).

At the end (a last ``reconcile`` past every lease and ``work --until-idle``),
checked from the outside (SPEC §10): one row per (schedule, slot, trigger);
every slot since the schedules were applied — computed here with zoneinfo,
not the engine's cron — is a run, MISSED, SKIPPED or MANUAL_REQUIRED, or lies
in a ``too_old`` range; no row for a slot that is not the schedule's; every run
finished; and no step the database had shown SUCCESS started again (the
``four_steps`` side-effect log against an outside poller of the database).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import create_engine, select, text

from engine.store.tables import audit_events, runs, schedules
from tests.acceptance import procs
from tests.reliability.nodes import Node, SuccessWatch, slots_seen, step_executions
from tests.reliability.nodes import utc as _utc
from tests.support import write_config

pytestmark = pytest.mark.slow

ZONES = ("Asia/Seoul", "Europe/Berlin", "America/New_York", "Australia/Sydney", "UTC", "America/Sao_Paulo")
# Local wall times: around the transitions (in the gap, in the fold, their edges) and ordinary ones.
TIMES = ((1, 30), (2, 0), (2, 30), (2, 59), (3, 0), (0, 0), (9, 15), (19, 30), (23, 59), (12, 45))
MISFIRE = ("CATCH_UP_ALL", "CATCH_UP_ALL", "RUN_ONCE", "SKIP", "MANUAL")
OVERLAP = ("ALLOW", "ALLOW", "QUEUE_NEW", "BUFFER_ONE", "SKIP_NEW")
FINAL = {"SUCCESS", "MISSED", "SKIPPED", "MANUAL_REQUIRED"}


def soak_schedules(count: int = 200) -> list[dict[str, Any]]:
    """``count`` daily schedules: every zone, time, misfire and overlap policy; a fifth run ``four_steps``."""
    made = []
    for n in range(count):
        hour, minute = TIMES[n % len(TIMES)]
        made.append({"name": f"s{n:03d}", "workflow": "four_steps" if n % 5 == 0 else "echo", "project": f"p{n:03d}",
                     "cron": f"{minute} {hour} * * *", "timezone": ZONES[n % len(ZONES)],
                     "misfire": MISFIRE[(n // 6) % len(MISFIRE)], "overlap": OVERLAP[(n // 30) % len(OVERLAP)]})
    return made


def local_slot(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime:
    """The instant a daily ``minute hour`` cron fires on ``day`` (SPEC §2, computed without the engine's cron).

    The wall time if it exists (its first occurrence in a fold); in a gap, the
    first instant after it, i.e. the end of the gap.
    """
    wall = datetime(day.year, day.month, day.day, hour, minute)
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    at = first - timedelta(hours=3)  # in a gap: the first whole minute whose wall time is past it
    while at.astimezone(zone).replace(tzinfo=None) < wall:
        at += timedelta(minutes=1)
    return at


def expected(spec: dict[str, Any], start: datetime, end: datetime) -> list[datetime]:
    minute, hour = (int(x) for x in spec["cron"].split()[:2])
    zone = ZoneInfo(spec["timezone"])
    day, found = (start - timedelta(days=1)).date(), []
    while day <= (end + timedelta(days=1)).date():
        slot = local_slot(day, hour, minute, zone)
        if start <= slot < end:
            found.append(slot)
        day += timedelta(days=1)
    return found


def transitions(start: datetime, end: datetime) -> list[str]:
    """The DST transitions in [start, end) of the zones used (hourly scan), for the failure messages."""
    found = []
    for name in ZONES:
        zone, at = ZoneInfo(name), start
        while at < end:
            if at.astimezone(zone).utcoffset() != (at + timedelta(hours=1)).astimezone(zone).utcoffset():
                found.append(f"{name} {at.date()}")
            at += timedelta(hours=1)
    return found


class Soak:
    def __init__(self, url: str, tmp: Path, nodes: int, seed: int, applied: datetime, kill_share: float) -> None:
        self.url, self.tmp, self.seed, self.applied, self.kill_share = url, tmp, seed, applied, kill_share
        self.log = tmp / "steps.log"
        self.specs = soak_schedules()
        self.config = write_config(tmp / "reportflow.toml", db_url=url, schedules=self.specs,
                                   sections={"worker": {"lease": "30s", "poll_interval": "0.2s", "max_attempts": 10,
                                                        "retry_backoff": "1s"},
                                             "testflow": {"log": str(self.log)}})
        self.count = nodes
        self.rng = random.Random(f"{seed}:soak")
        self.engine = create_engine(url)
        self.kills = self.restarts = self.rounds = 0
        self.watch = SuccessWatch(url, self.log)

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    def settled(self, now: datetime) -> bool:
        """Nothing left to do at ``now``: every schedule ticked past it, no run open."""
        behind = self.scalar("SELECT count(*) FROM schedules WHERE enabled AND NOT archived AND next_run_at <= :now",
                             now=now)
        busy = self.scalar("SELECT count(*) FROM runs WHERE status IN ('QUEUED', 'RUNNING', 'RETRY_PENDING')")
        return bool(behind == 0 and busy == 0)

    def round(self, at: datetime) -> None:
        clock = procs.Shared(at)
        nodes = [Node(f"r{self.rounds:03d}-n{n}", self.tmp, self.config, clock.at(),
                      ("serve", "--worker-id", f"node{n}"), restart_after=0.0).start() for n in range(self.count)]
        began = time.monotonic()
        kill_at = began + self.rng.uniform(0.3, 4.0) if self.rng.random() < self.kill_share else None
        victim = self.rng.randrange(self.count)
        context = f"seed {self.seed}, round {self.rounds} at {at.isoformat()}"
        while True:
            if kill_at is not None and time.monotonic() >= kill_at:
                nodes[victim].kill()
                self.kills += 1
                kill_at = None
            if kill_at is None and time.monotonic() - began > 0.5 and self.settled(at + timedelta(seconds=1)):
                break
            assert time.monotonic() - began < 240, f"{context}: the nodes did not settle"
            time.sleep(0.1)
        for node in nodes:
            code = node.terminate()  # None: killed by the test and not restarted yet (that exit is checked below)
            if code is None:
                code = 143
            if code == -15 and "serve_started" not in Path(node.proc.log_path).read_text():  # type: ignore[union-attr]
                code = 143  # restarted after a kill and still importing when the round ended: it had done nothing
            # 143: stopped by SIGTERM after handing its run back (128 + 15, as a shell reports it)
            assert code == 143, f"{context}: {node.name} exited {code} on SIGTERM\n{node.logs()[-3000:]}"
            for ex in node.exits:
                assert ex.code == -9, f"{context}: {node.name} died by itself ({ex.code}): {ex.last_line}"
            self.restarts += len(node.exits)
        self.rounds += 1


def run_soak(url: str, tmp: Path, nodes: int, seed: int, long_run: bool) -> str:
    applied = datetime(2026, 1, 1, 0, 3, tzinfo=UTC) if long_run else datetime(2026, 3, 28, 0, 3, tzinfo=UTC)
    span = timedelta(days=365) if long_run else timedelta(days=9)
    soak = Soak(url, tmp, nodes, seed, applied, kill_share=0.8 if long_run else 1.0)
    began = time.monotonic()
    for args in (("db", "upgrade"), ("schedules", "apply")):
        done = procs.run(tmp, soak.config, *args, now=procs.Shared(applied).at())
        assert done.returncode == 0, done.stderr
    soak.watch.start()
    at = applied
    try:
        while at < applied + span:
            # Seeded steps: 36-60 simulated hours (36-108 with --long), each a round of node processes.
            step = soak.rng.randint(2160, 6480) if long_run else soak.rng.randint(2160, 3600)
            at = min(at + timedelta(minutes=step), applied + span)
            soak.round(at)
    finally:
        soak.watch.halt()
    later = procs.Shared(at).at(300)
    assert procs.run(tmp, soak.config, "reconcile", now=later).returncode == 0
    drained = procs.run(tmp, soak.config, "work", "--until-idle", now=later, timeout=600)
    assert drained.returncode == 0, drained.stderr[-3000:]
    soak.watch.read_once()
    soak.watch.engine.dispose()

    with soak.engine.connect() as conn:
        sched = {row.name: row for row in conn.execute(select(schedules))}
        rows = conn.execute(select(runs.c.id, runs.c.schedule_id, runs.c.scheduled_for, runs.c.trigger_type,
                                   runs.c.revision, runs.c.status, runs.c.workflow)).all()
        too_old = conn.execute(select(audit_events.c.schedule_id, audit_events.c.after)
                               .where(audit_events.c.action == "slots_too_old")).all()
    soak.engine.dispose()
    statuses = Counter(r.status for r in rows)
    crossed = transitions(applied, at)
    context = f"seed {seed}, {soak.rounds} rounds to {at.isoformat()}, {soak.kills} kills, DST transitions {crossed}"
    # What the default size is for: a spring gap, an autumn fold, and nodes killed mid-round.
    assert {"Europe/Berlin 2026-03-29", "Australia/Sydney 2026-04-04"} <= set(crossed), context
    assert soak.kills >= soak.rounds // 2 + 1, context

    ranges, have = slots_seen(rows, too_old, context)
    for spec in soak.specs:
        row = sched[spec["name"]]
        assert _utc(row.next_run_at) > at - timedelta(days=1), f"{context}: {spec['name']} fell behind"
        wanted = expected(spec, applied, _utc(row.next_run_at))
        lost = [s for s in wanted if s not in have[row.id] and not any(lo <= s < hi for lo, hi in ranges[row.id])]
        assert not lost, f"{context}: {spec['name']} ({spec['cron']} {spec['timezone']}) lost slots {lost[:3]}"
        extra = sorted(have[row.id] - set(wanted))
        assert not extra, f"{context}: {spec['name']} ({spec['cron']} {spec['timezone']}) has foreign slots {extra[:3]}"
    assert set(statuses) <= FINAL, f"{context}: not every run finished: {dict(statuses)}"
    violations = soak.watch.violations()
    assert not violations, f"{context}: {violations[:5]}"
    starts, ends = step_executions(soak.log)
    executed = {r.id for r in rows if r.workflow == "four_steps" and r.status == "SUCCESS"}
    assert {run_id for run_id, step in ends if step == "FOUR"} == executed, f"{context}: a SUCCESS run never executed"
    return (f"{soak.rounds} rounds of {nodes} serve nodes, {soak.kills} SIGKILLs, {soak.restarts} restarts, "
            f"{len(rows)} rows {dict(statuses)}, {len(executed)} four_steps runs, "
            f"{sum(1 for n in starts.values() if n > 1)} steps started again before their SUCCESS was committed, "
            f"0 after; {time.monotonic() - began:.0f}s; {context}")


@pytest.mark.long
@pytest.mark.postgres
def test_soak_on_postgresql_three_nodes(pg_url: str, tmp_path: Path, seed: int, long_run: bool) -> None:
    print("\nsoak postgresql: " + run_soak(pg_url, tmp_path, 3, seed, long_run))


@pytest.mark.long
def test_soak_on_sqlite_two_nodes(tmp_path: Path, seed: int, long_run: bool) -> None:
    print("\nsoak sqlite: " + run_soak(f"sqlite:///{tmp_path / 'rf.db'}", tmp_path, 2, seed, long_run))


def test_the_expected_slots_follow_the_dst_rules() -> None:
    """The test's own slot rule against SPEC §2's examples (so the soak's oracle is not the engine's cron)."""
    ny = ZoneInfo("America/New_York")
    assert local_slot(date(2026, 3, 8), 2, 30, ny) == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # gap: 03:00 EDT
    assert local_slot(date(2026, 11, 1), 1, 30, ny) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # fold: 01:30 EDT
    sydney = ZoneInfo("Australia/Sydney")
    assert local_slot(date(2026, 4, 5), 2, 30, sydney) == datetime(2026, 4, 4, 15, 30, tzinfo=UTC)  # AEDT, first
    berlin = ZoneInfo("Europe/Berlin")
    assert local_slot(date(2026, 3, 29), 2, 30, berlin) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST
    assert transitions(datetime(2026, 3, 27, tzinfo=UTC), datetime(2026, 4, 6, tzinfo=UTC)) == [
        "Europe/Berlin 2026-03-29", "Australia/Sydney 2026-04-04"]
