"""Success rate and freshness of schedules (SPEC §15.2): load the periods, ``core.slo`` decides."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.engine import Connection

from engine.core import cron, slo
from engine.core.models import Schedule
from engine.runtime import Runtime
from engine.store import periods
from engine.store import schedules as schedule_rows

MAX_SLOTS = 20_000  # a minutely schedule over 30 days is 43,200 slots: the window is cut to its newest ones


def slo_of(conn: Connection, schedule: Schedule, now: datetime, window: timedelta) -> slo.Slo:
    """One schedule's success rate and freshness over ``window`` before ``now`` (in the caller's transaction).

    Periods before the schedule was created count only when they have a run (a backfill).
    """
    spec = schedule.spec
    deadline = slo.deadline_of(spec)
    start = now - window
    slots = [f.at for f in cron.fires_between(spec.cron, spec.timezone, start, now, dst_gap=spec.dst_gap,
                                               dst_fold=spec.dst_fold)]
    slots = slots[-MAX_SLOTS:]
    facts = periods.period_facts(conn, schedule.id, slots[0], slots[-1]) if slots else {}
    if schedule.created_at is not None:  # periods before the schedule existed count only if something ran them
        slots = [s for s in slots if s > schedule.created_at or s in facts]
    return slo.compute_slo(slots, facts, now=now, deadline=deadline, window=window)


def schedule_slo(rt: Runtime, schedule_name: str) -> slo.Slo:
    """Success rate, freshness, periods due and window of one schedule at ``rt.clock.now()``."""
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, schedule_name)
        return slo_of(conn, schedule, rt.clock.now(), rt.config.notify.slo_window)


def all_slos(rt: Runtime) -> dict[str, slo.Slo]:
    """Every live schedule's success rate and freshness, by name."""
    now = rt.clock.now()
    with rt.store.read() as conn:
        return {s.name: slo_of(conn, s, now, rt.config.notify.slo_window)
                for s in schedule_rows.list_schedules(conn)}
