"""The latest revision of each period of a schedule, and the success rate and freshness they give (SPEC §15.2).

A period is judged by its business key when the schedule's workflow is known here: a
slot of today's cron finds the run of its period even when an earlier version of the
schedule made it at another instant (a cron moved from 19:30 to 20:00 after today's
19:30 run succeeded leaves today successful, not late).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.engine import Connection

from engine.core import policies, slo
from engine.core.models import PeriodKind, RunStatus
from engine.core.schedule_spec import Schedule
from engine.store.tables import runs

_KEYS_PER_QUERY = 500


def period_facts(conn: Connection, schedule: Schedule, slots: Sequence[datetime],
                 kind: PeriodKind | None = None) -> dict[datetime, slo.PeriodFact]:
    """Each slot's period: its latest revision's status and completion (slots without a run left out).

    With ``kind`` (the workflow's period) a slot finds its period's run by business key, whichever
    version of the schedule made it; without, by the slot's instant.
    """
    if not slots:
        return {}
    facts: dict[datetime, slo.PeriodFact] = {}
    if kind is None or kind is PeriodKind.SLOT:
        query = (select(runs.c.scheduled_for, runs.c.status, runs.c.completed_at, runs.c.reason)
                 .where(runs.c.schedule_id == schedule.id, runs.c.scheduled_for >= slots[0],
                        runs.c.scheduled_for <= slots[-1])
                 .order_by(runs.c.scheduled_for, runs.c.revision, runs.c.id))
        for slot, status, completed_at, reason in conn.execute(query):
            facts[slot] = slo.PeriodFact(slot, RunStatus(status), completed_at, reason)  # the last row: the latest revision
        return facts
    spec = schedule.spec
    key_of = {slot: policies.business_period(kind, slot, spec.timezone, spec.report_on, spec.sprint).key for slot in slots}
    keys = sorted(set(key_of.values()))
    latest: dict[str, tuple[RunStatus, datetime | None, str | None]] = {}
    for first in range(0, len(keys), _KEYS_PER_QUERY):
        chunk = keys[first:first + _KEYS_PER_QUERY]
        query = (select(runs.c.business_key, runs.c.status, runs.c.completed_at, runs.c.reason)
                 .where(runs.c.schedule_id == schedule.id, runs.c.business_key.in_(chunk))
                 .order_by(runs.c.business_key, runs.c.revision, runs.c.id))
        for key, status, completed_at, reason in conn.execute(query):
            latest[key] = (RunStatus(status), completed_at, reason)
    for slot, key in key_of.items():
        if key in latest:
            facts[slot] = slo.PeriodFact(slot, *latest[key])
    return facts


def measure(conn: Connection, schedule: Schedule, now: datetime, window: timedelta,
            kind: PeriodKind | None = None) -> slo.Slo:
    """One schedule's success rate and freshness over ``window`` before ``now`` (in the caller's transaction):
    its slots and their judgement are ``slo``'s, the facts are read here.

    The one definition: ``schedules list``/``show``, the metrics, the web page and the ops report use it.
    ``kind``: the workflow's period, when known (periods are then judged by business key).
    """
    slots = slo.window_slots(schedule.spec, now - window, now)
    return slo.measure(schedule, slots, period_facts(conn, schedule, slots, kind), now=now, window=window)
