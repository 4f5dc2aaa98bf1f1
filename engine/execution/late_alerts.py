"""``run_late`` (SPEC §15.1): periods not SUCCESS by ``scheduled_for + deadline``, found by each reconcile pass.

Late: no row at all, or a latest revision still waiting or running. Each late period
is recorded once (its dedupe key); the pass reads first and writes only new ones, so
a sweep with nothing new takes no write lock.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from engine.core import alerts, calendars, logs, slo
from engine.core.clock import format_instant
from engine.core.cron import timetable
from engine.core.schedule_spec import Schedule
from engine.runtime import Runtime
from engine.store import outbox, periods, schedule_rows

log = logging.getLogger(__name__)
LOOKBACK = timedelta(days=2)  # how far back past a deadline a pass looks for late periods


def find_late(rt: Runtime, now: datetime) -> list[tuple[Schedule, datetime]]:
    """(schedule, slot) of every late period not alerted yet, over the last ``LOOKBACK`` of deadlines."""
    found: list[tuple[Schedule, datetime]] = []
    with rt.store.read() as conn:
        for schedule in schedule_rows.list_schedules(conn):
            windows = calendars.windows_of(schedule, rt.config.maintenance)
            if not schedule.enabled or calendars.window_at(windows, schedule.name, now) is not None:
                continue  # inside a maintenance window nothing is late
            spec = schedule.spec
            deadline = slo.deadline_of(spec)
            start = now - deadline - LOOKBACK
            if schedule.created_at is not None:  # its first slot is the first fire after it was created
                start = max(start, schedule.created_at + timedelta(microseconds=1))
            # A holiday's or a window's slot is not run on purpose, nor is one whose deadline a window covers.
            slots = [f.at for f in timetable.fires_between(spec.cron, spec.timezone, start, now - deadline,
                                                       dst_gap=spec.dst_gap, dst_fold=spec.dst_fold)
                     if calendars.excuse(spec, windows, f.at) is None
                     and calendars.window_at(windows, schedule.name, f.at + deadline) is None]
            if not slots:
                continue
            facts = periods.period_facts(conn, schedule, slots, rt.period_kind(spec.workflow))
            slots = [s for s in slots if s not in facts or facts[s].reason not in calendars.EXCUSED]
            late = slo.late_slots(slots, facts, now=now, deadline=deadline)
            keys = {outbox.period_dedupe_key(alerts.AlertEvent.RUN_LATE, schedule.name, slot): slot for slot in late}
            seen = outbox.recorded(conn, list(keys))
            found += [(schedule, slot) for key, slot in keys.items() if key not in seen]
    return found


def mark_late(rt: Runtime, now: datetime) -> int:
    """Record ``run_late`` for each new late period (one transaction); returns how many."""
    late = find_late(rt, now)
    if not late:
        return 0
    with rt.store.write() as conn:
        for schedule, slot in late:
            deadline = slo.deadline_of(schedule.spec)
            business_key = rt.period_key(schedule, slot)
            c = outbox.consecutive_unsuccessful(conn, schedule.id, slot)
            outbox.record_schedule_event(
                conn, schedule, alerts.AlertEvent.RUN_LATE,
                outbox.period_dedupe_key(alerts.AlertEvent.RUN_LATE, schedule.name, slot), now,
                f"{schedule.name} {business_key or format_instant(slot)}: not SUCCESS by its deadline "
                f"({format_instant(slot + deadline)})", consecutive=c, business_key=business_key,
                details={"scheduled_for": format_instant(slot), "deadline_at": format_instant(slot + deadline)})
    for schedule, slot in late:
        logs.event(log, logging.WARNING, "run_late", schedule=schedule.name, slot=format_instant(slot))
    return len(late)

