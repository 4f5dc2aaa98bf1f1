"""The SQL of the alert outbox (SPEC §15.1): record an event in the caller's transaction, list, mark sent.

``record_*`` take the caller's connection, so an event commits or rolls back with
the change that causes it. Each event has a ``dedupe_key`` (one per event and run, or
event and period) under a unique index: recording it again is a no-op, so an event is
raised at most once however often its cause is replayed. The sender
(``engine.operations.outbox_sender``) reads ``list_due`` outside every write transaction
and marks the outcome with ``mark_delivered`` / ``mark_failed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, text, update
from sqlalchemy.engine import Connection, RowMapping

from engine.core import alerts, redact
from engine.core.clock import format_instant
from engine.core.models import Run
from engine.core.schedule_spec import Criticality, Schedule
from engine.store import fastsql, schedule_rows
from engine.store.run_rows import dialect_insert
from engine.store.tables import events, runs, schedules, sql_in

PENDING = alerts.EventStatus.PENDING.value


def run_dedupe_key(event: alerts.AlertEvent, run_id: int) -> str:
    """The dedupe key of an event raised at most once per run."""
    return f"{event}/run/{run_id}"


def period_dedupe_key(event: alerts.AlertEvent, schedule: str, scheduled_for: datetime | str) -> str:
    """The dedupe key of an event raised at most once per period of a schedule."""
    slot = scheduled_for if isinstance(scheduled_for, str) else format_instant(scheduled_for)
    return f"{event}/{schedule}/{slot}"


def record_event(conn: Connection, *, event: alerts.AlertEvent, dedupe_key: str, at: datetime, summary: str,
                 decision: alerts.SeverityDecision, schedule: str | None = None, run_id: int | None = None,
                 key: str | None = None, business_key: str | None = None,
                 details: Mapping[str, Any] | None = None) -> bool:
    """Insert one event unless its ``dedupe_key`` is recorded already; returns whether it was new.

    An event that is no member of ``alerts.AlertEvent`` raises ValueError: the outbox holds no other.
    """
    status = alerts.EventStatus.PENDING if decision.notify else alerts.EventStatus.QUIET
    # An error message may quote a URL with credentials: masked before it is stored or sent (SPEC §14).
    summary = redact.mask_urls(summary)
    if details:
        details = {k: redact.mask_urls(v) if isinstance(v, str) else v for k, v in details.items()}
    stmt = dialect_insert(conn)(events).values(
        dedupe_key=dedupe_key, event=alerts.AlertEvent(event).value, severity=decision.severity.value, at=at, summary=summary,
        schedule=schedule, run_id=run_id, key=key, business_key=business_key,
        details=dict(details) if details else None, status=status.value, attempts=0)
    return bool(conn.execute(stmt.on_conflict_do_nothing(index_elements=["dedupe_key"])).rowcount)


def consecutive_unsuccessful(conn: Connection, schedule_id: int, scheduled_for: datetime) -> int:
    """c of the §15.1 table for a period that did not succeed: it, plus the unsuccessful periods right before it."""
    recent = conn.execute(
        select(runs.c.scheduled_for, runs.c.status)
        .where(runs.c.schedule_id == schedule_id, runs.c.scheduled_for < scheduled_for)
        .order_by(runs.c.scheduled_for.desc(), runs.c.revision.desc()).limit(12)).all()
    latest: dict[datetime, str] = {}
    for slot, status in recent:
        latest.setdefault(slot, status)  # the first row of a period is its latest revision
    return alerts.count_unsuccessful(list(latest.values())[:3])


def record_run_event(conn: Connection, run: Run, event: alerts.AlertEvent, now: datetime, summary: str,
                     details: Mapping[str, Any] | None = None) -> bool:
    """Record ``event`` about ``run`` (at most once per run), with the severity ``alerts.decide_run_severity``
    gives it from the facts read here, in the transaction that records it (none for a child run)."""
    child = run.parent_id is not None
    schedule = (schedule_rows.get_schedule_by_id(conn, run.schedule_id)
                if run.schedule_id is not None and not child else None)
    criticality = schedule.spec.criticality if schedule is not None else Criticality.NORMAL
    c = 1
    if schedule is not None and alerts.counts_periods(event):
        c = consecutive_unsuccessful(conn, schedule.id, run.scheduled_for)
    decision = alerts.decide_run_severity(event, child=child, criticality=criticality, consecutive=c)
    if decision is None:
        return False
    return record_event(conn, event=event, dedupe_key=run_dedupe_key(event, run.id), at=now, summary=summary,
                        decision=decision,
                        schedule=schedule.name if schedule is not None else None, run_id=run.id,
                        key=run.idempotency_key, business_key=run.business_key,
                        details={"consecutive": c, **(details or {})})


def record_schedule_event(conn: Connection, schedule: Schedule, event: alerts.AlertEvent, dedupe_key: str,
                          now: datetime, summary: str, *, consecutive: int = 1, business_key: str | None = None,
                          details: Mapping[str, Any] | None = None, run_id: int | None = None) -> bool:
    """Record ``event`` about a schedule or one of its periods (``run_id``: the run it names, if one), with the
    schedule's severity."""
    return record_event(conn, event=event, dedupe_key=dedupe_key, at=now, summary=summary,
                        decision=alerts.decide_severity(event, schedule.spec.criticality, consecutive),
                        schedule=schedule.name, business_key=business_key, details=details, run_id=run_id)


# Asked at every SUCCESS, so it is prepared once and run below SQLAlchemy's per-call pipeline
# (engine.store.fastsql): built per call, it cost a quarter of a no-op run's time.
_RAISED = (select(events.c.event)
           .where(events.c.business_key == bindparam("b_key"),
                  events.c.schedule == select(schedules.c.name)
                  .where(schedules.c.id == bindparam("b_schedule")).scalar_subquery(),
                  text(sql_in("events.event", alerts.RECOVERABLE)))
           .limit(1))


def record_recovered(conn: Connection, run: Run, now: datetime) -> bool:
    """A SUCCESS of a period that raised run_failed/run_partial/run_late: ``recovered``, once per period."""
    if run.schedule_id is None:
        return False
    raised = fastsql.execute(conn, _RAISED, {"b_key": run.business_key, "b_schedule": run.schedule_id}).fetchone()
    if raised is None:
        return False
    schedule = schedule_rows.get_schedule_by_id(conn, run.schedule_id)
    return record_schedule_event(
        conn, schedule, alerts.AlertEvent.RECOVERED,
        period_dedupe_key(alerts.AlertEvent.RECOVERED, schedule.name, run.scheduled_for), now,
        f"{schedule.name} {run.business_key} succeeded after {raised[0]} (run {run.id})",
        business_key=run.business_key, details={"run_id": run.id, "key": run.idempotency_key}, run_id=run.id)


def record_provider(conn: Connection, provider: str, label: str, *, up: bool, now: datetime, detail: str,
                    run: Run | None = None) -> bool:
    """``provider_down`` once while ``provider`` stays down (a report went out by a fallback), and
    ``provider_up`` once it answers again, only after a ``provider_down``; whether one was recorded."""
    latest = conn.execute(select(events.c.event).where(
        events.c.key == f"provider:{provider}",
        events.c.event.in_([alerts.AlertEvent.PROVIDER_DOWN.value, alerts.AlertEvent.PROVIDER_UP.value]))
        .order_by(events.c.id.desc()).limit(1)).scalar()
    down = latest == alerts.AlertEvent.PROVIDER_DOWN.value
    if up != down:  # nothing open to close, or already open
        return False
    event = alerts.AlertEvent.PROVIDER_UP if up else alerts.AlertEvent.PROVIDER_DOWN
    summary = (f"{label} answers again: the reports written by the fallback meanwhile are written again by it"
               if up else f"{label} does not answer: reports go out by the fallback writer until it does ({detail})")
    return record_event(conn, event=event, dedupe_key=f"{event.value}/{provider}/{format_instant(now)}", at=now,
                        summary=summary, decision=alerts.decide_severity(event, Criticality.NORMAL, 1),
                        key=f"provider:{provider}", run_id=run.id if run is not None else None,
                        details={"provider": label, **({"run": run.id} if run is not None else {})})


def recorded(conn: Connection, dedupe_keys: list[str]) -> set[str]:
    """Which of ``dedupe_keys`` are recorded already."""
    if not dedupe_keys:
        return set()
    return set(conn.execute(select(events.c.dedupe_key).where(events.c.dedupe_key.in_(dedupe_keys))).scalars())


def alert_from_row(row: RowMapping) -> alerts.Alert:
    """An ``events`` row as the sender and the read side see it."""
    return alerts.Alert(
        id=str(row["dedupe_key"]), event=row["event"], severity=alerts.Severity(row["severity"]), at=row["at"],
        summary=row["summary"], status=alerts.EventStatus(row["status"]), schedule=row["schedule"],
        run_id=row["run_id"], key=row["key"], business_key=row["business_key"], details=row["details"],
        attempts=row["attempts"], next_try_at=row["next_try_at"], delivered_at=row["delivered_at"],
        last_error=row["last_error"])


def list_events(conn: Connection, *, pending_only: bool = False, schedule: str | None = None,
                limit: int = 200) -> list[alerts.Alert]:
    """Recorded events, newest first; ``pending_only``: those not delivered yet."""
    query = select(events).order_by(events.c.id.desc()).limit(limit)
    if pending_only:
        query = query.where(events.c.status == PENDING)
    if schedule is not None:
        query = query.where(events.c.schedule == schedule)
    return [alert_from_row(r) for r in conn.execute(query).mappings()]


def list_due(conn: Connection, now: datetime, *, limit: int = 100) -> list[tuple[int, alerts.Alert]]:
    """Pending events whose next try is due at ``now``, oldest first, with their row ids."""
    query = (select(events).where(events.c.status == PENDING,
                                  (events.c.next_try_at.is_(None)) | (events.c.next_try_at <= now))
             .order_by(events.c.id).limit(limit))
    return [(int(r["id"]), alert_from_row(r)) for r in conn.execute(query).mappings()]


def mark_delivered(conn: Connection, row_id: int, now: datetime) -> None:
    """The event reached every target: it is not sent again."""
    conn.execute(update(events).where(events.c.id == row_id, events.c.status == PENDING).values(
        status=alerts.EventStatus.DELIVERED.value, delivered_at=now, attempts=events.c.attempts + 1,
        next_try_at=None, last_error=None))


def mark_failed(conn: Connection, row_id: int, *, attempts: int, next_try_at: datetime, error: str) -> None:
    """A try failed: count it and set when to try again (the error is a short reason, never a URL)."""
    conn.execute(update(events).where(events.c.id == row_id, events.c.status == PENDING).values(
        attempts=attempts, next_try_at=next_try_at, last_error=error[:500]))

