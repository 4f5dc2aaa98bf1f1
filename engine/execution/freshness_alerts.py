"""``freshness_low`` (SPEC §15.8): a schedule's freshness below its ``freshness_target``, found by each reconcile pass.

The decision is ``core.freshness.decide_freshness_low``; each judged period raises at
most one event (its dedupe key). The pass reads first and writes only new events, so a
sweep with nothing new takes no write lock.
"""

from __future__ import annotations

import logging
from datetime import datetime

from engine.core import alerts, freshness, logs, slo
from engine.core.clock import format_instant
from engine.core.schedule_spec import Schedule
from engine.runtime import Runtime
from engine.store import outbox, periods, schedule_rows

log = logging.getLogger(__name__)
EVENT = alerts.AlertEvent.FRESHNESS_LOW


def find_low(rt: Runtime, now: datetime) -> list[tuple[Schedule, freshness.FreshnessLow]]:
    """Each enabled schedule with a ``freshness_target`` whose latest judged period found it low, not alerted yet."""
    window = rt.config.notify.slo_window
    found: list[tuple[Schedule, freshness.FreshnessLow]] = []
    with rt.store.read() as conn:
        for schedule in schedule_rows.list_schedules(conn):
            spec = schedule.spec
            if not schedule.enabled or spec.freshness_target is None:
                continue
            # Two windows: the judgements of the last one each look back a window of their own.
            slots = slo.window_slots(spec, now - 2 * window, now, limit=2 * slo.MAX_SLOTS)
            facts = periods.period_facts(conn, schedule, slots, rt.period_kind(spec.workflow))
            slots = slo.since_created(schedule, slo.counted_slots(schedule, slots, facts))
            low = freshness.decide_freshness_low(slots, facts, now=now, deadline=slo.deadline_of(spec),
                                                 window=window, target=spec.freshness_target,
                                                 max_slots=slo.MAX_SLOTS)
            if low is None:
                continue
            key = outbox.period_dedupe_key(EVENT, schedule.name, low.slot_at)
            if not outbox.recorded(conn, [key]):
                found.append((schedule, low))
    return found


def mark_low(rt: Runtime, now: datetime) -> int:
    """Record ``freshness_low`` for each schedule newly found below its target (one transaction); how many."""
    low = find_low(rt, now)
    if not low:
        return 0
    window = rt.config.notify.slo_window
    with rt.store.write() as conn:
        for schedule, judged in low:
            business_key = rt.period_key(schedule, judged.slot_at)
            days = window.total_seconds() / 86400
            outbox.record_schedule_event(
                conn, schedule, EVENT, outbox.period_dedupe_key(EVENT, schedule.name, judged.slot_at), now,
                f"{schedule.name}: freshness {judged.freshness:.0%} over the last {days:g}d is below its target "
                f"{judged.target:.0%} ({judged.periods_due} periods due; judged at "
                f"{business_key or format_instant(judged.slot_at)})",
                consecutive=judged.consecutive, business_key=business_key,
                details={"freshness": round(judged.freshness, 4), "target": judged.target,
                         "consecutive": judged.consecutive, "periods_due": judged.periods_due,
                         "scheduled_for": format_instant(judged.slot_at), "window": f"{days:g}d"})
    for schedule, judged in low:
        logs.event(log, logging.WARNING, EVENT, schedule=schedule.name, freshness=round(judged.freshness, 4),
                   target=judged.target)
    return len(low)

