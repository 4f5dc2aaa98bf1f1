"""Success rate and freshness of schedules (SPEC §15.2): load the periods, ``core.slo`` decides."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.engine import Connection

from engine.core import slo
from engine.core.models import Schedule
from engine.runtime import Runtime
from engine.store import periods
from engine.store import schedules as schedule_rows

#: One schedule's success rate and freshness in the caller's transaction (``store.periods.measure``).
slo_of = periods.measure


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
