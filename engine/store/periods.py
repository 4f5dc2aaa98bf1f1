"""The latest revision of each period of a schedule, and the success rate and freshness they give (SPEC §15.2)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.engine import Connection

from engine.core import cron, slo
from engine.core.models import RunStatus, Schedule
from engine.store.tables import runs


def period_facts(conn: Connection, schedule_id: int, start: datetime, end: datetime) -> dict[datetime, slo.PeriodFact]:
    """Each period with ``start <= scheduled_for <= end``: its latest revision's status and completion."""
    query = (select(runs.c.scheduled_for, runs.c.status, runs.c.completed_at)
             .where(runs.c.schedule_id == schedule_id, runs.c.scheduled_for >= start, runs.c.scheduled_for <= end)
             .order_by(runs.c.scheduled_for, runs.c.revision, runs.c.id))
    facts: dict[datetime, slo.PeriodFact] = {}
    for slot, status, completed_at in conn.execute(query):
        facts[slot] = slo.PeriodFact(slot, RunStatus(status), completed_at)  # the last row is the latest revision
    return facts


MAX_SLOTS = 20_000  # a minutely schedule over 30 days is 43,200 slots: the window is cut to its newest ones


def measure(conn: Connection, schedule: Schedule, now: datetime, window: timedelta) -> slo.Slo:
    """One schedule's success rate and freshness over ``window`` before ``now`` (in the caller's transaction).

    The one definition: ``schedules list``/``show``, the metrics, the web page and the ops report use it.
    Periods before the schedule was created count only when they have a run (a backfill).
    """
    spec = schedule.spec
    start = now - window
    slots = [f.at for f in cron.fires_between(spec.cron, spec.timezone, start, now, dst_gap=spec.dst_gap,
                                               dst_fold=spec.dst_fold)]
    slots = slots[-MAX_SLOTS:]
    facts = period_facts(conn, schedule.id, slots[0], slots[-1]) if slots else {}
    if schedule.created_at is not None:  # periods before the schedule existed count only if something ran them
        slots = [s for s in slots if s > schedule.created_at or s in facts]
    return slo.compute_slo(slots, facts, now=now, deadline=slo.deadline_of(spec), window=window)
