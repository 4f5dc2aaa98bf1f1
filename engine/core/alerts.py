"""Alerts (SPEC §15.1): the events, their severity, their payload and the sender's retry delay.

Pure: every function here is a function of values and ``now``. The outbox that
stores the events is ``engine.store.outbox``; the sender is
``engine.operations.outbox_sender``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from engine.core.clock import format_instant
from engine.core.models import UNSUCCESSFUL_STATUSES
from engine.core.schedule_spec import Criticality


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class EventStatus(StrEnum):
    """An outbox row's delivery state: waiting to be sent, sent, or recorded only (a quiet ``low`` alert)."""

    PENDING = "PENDING"
    DELIVERED = "DELIVERED"
    QUIET = "QUIET"


class AlertEvent(StrEnum):
    """Every event the engine records in the outbox; the value is the ``event`` column and the webhook's field."""

    RUN_FAILED = "run_failed"
    RUN_PARTIAL = "run_partial"
    RUN_LATE = "run_late"
    SLOTS_NOT_RUN = "slots_not_run"
    RUN_STUCK = "run_stuck"
    STALLED = "stalled"
    SILENT = "silent"
    CONFIG_INVALID = "config_invalid"
    FRESHNESS_LOW = "freshness_low"
    PRUNE_HELD = "prune_held"
    RECOVERED = "recovered"
    BACKUP_FAILED = "backup_failed"
    UPSTREAM_LATE = "upstream_late"  # a dependent run's upstream was not SUCCESS within its after_window
    PROVIDER_DOWN = "provider_down"  # a report went out by a fallback: the provider it needs does not answer
    PROVIDER_UP = "provider_up"  # that provider answers again (closes its provider_down)


# Events about a period that did not succeed: their severity grows with the run of failed periods.
PERIOD_EVENTS = frozenset({AlertEvent.RUN_FAILED, AlertEvent.RUN_PARTIAL, AlertEvent.RUN_LATE,
                           AlertEvent.SLOTS_NOT_RUN, AlertEvent.UPSTREAM_LATE})
# Events about the machinery itself: severity from the criticality alone.
HEALTH_EVENTS = frozenset({AlertEvent.RUN_STUCK, AlertEvent.STALLED, AlertEvent.SILENT, AlertEvent.CONFIG_INVALID})
# A schedule's freshness below its target (SPEC §15.8): its severity grows like a period event's.
SLO_EVENTS = frozenset({AlertEvent.FRESHNESS_LOW})
# Raised by these, a later SUCCESS of the same period raises ``recovered``.
RECOVERABLE = (AlertEvent.RUN_FAILED, AlertEvent.RUN_PARTIAL, AlertEvent.RUN_LATE)
# Latest-revision statuses that make a period count as not successful (c in the §15.1 table).
MAX_RETRY_DELAY = timedelta(minutes=15)
FIRST_RETRY_DELAY = timedelta(seconds=30)


@dataclass(frozen=True)
class SeverityDecision:
    severity: Severity
    notify: bool  # False: recorded only (``low`` before its third failed period)


def decide_severity(event: AlertEvent, criticality: Criticality, consecutive: int) -> SeverityDecision:
    """The severity of ``event`` for a schedule of ``criticality`` after ``consecutive`` unsuccessful periods.

    ``consecutive`` counts this period (at least 1). The §15.1 table; ``recovered`` is
    always ``info`` (and ``provider_up``), ``prune_held`` and ``provider_down`` always ``warning``,
    ``backup_failed`` always ``critical`` (the database is what every schedule stands on).
    """
    if event not in AlertEvent.__members__.values():
        raise ValueError(f"unknown event {event!r}")
    event = AlertEvent(event)
    c = max(1, consecutive)
    if event in (AlertEvent.RECOVERED, AlertEvent.PROVIDER_UP):
        return SeverityDecision(Severity.INFO, True)
    if event is AlertEvent.PROVIDER_DOWN:  # the reports still go out (by the fallback): worth a look, not a page
        return SeverityDecision(Severity.WARNING, True)
    if event is AlertEvent.PRUNE_HELD:
        return SeverityDecision(Severity.WARNING, True)
    if event is AlertEvent.BACKUP_FAILED:
        return SeverityDecision(Severity.CRITICAL, True)
    if event in HEALTH_EVENTS:
        loud = criticality in (Criticality.CRITICAL, Criticality.HIGH)
        return SeverityDecision(Severity.CRITICAL if loud else Severity.WARNING, True)
    if criticality is Criticality.CRITICAL:
        return SeverityDecision(Severity.CRITICAL if c >= 2 else Severity.WARNING, True)
    if criticality is Criticality.HIGH:
        return SeverityDecision(Severity.CRITICAL if c >= 3 else Severity.WARNING, True)
    if criticality is Criticality.LOW and c < 3:
        return SeverityDecision(Severity.INFO, False)
    return SeverityDecision(Severity.WARNING, True)


def decide_run_severity(event: AlertEvent, *, child: bool, criticality: Criticality,
                        consecutive: int) -> SeverityDecision | None:
    """``decide_severity`` for an event about a run; None for a child run, which raises nothing of its own:
    its failure is part of its parent's alert (the parent ends PARTIAL_SUCCESS naming it), routed by the
    parent's schedule, so one problem is one alert."""
    return None if child else decide_severity(event, criticality, consecutive)


def counts_periods(event: AlertEvent) -> bool:
    """Whether ``event``'s severity grows with the unsuccessful periods before it (``consecutive``)."""
    return event in PERIOD_EVENTS


def count_unsuccessful(earlier_statuses: Iterable[str]) -> int:
    """c for a period that did not succeed: 1 plus the unsuccessful periods right before it.

    ``earlier_statuses``: the latest-revision status of each earlier period, newest first.
    """
    c = 1
    for status in earlier_statuses:
        if status not in UNSUCCESSFUL_STATUSES:
            break
        c += 1
    return c


def decide_alert_retry_at(attempts: int, now: datetime) -> datetime:
    """When to try an undelivered event again after ``attempts`` failed tries: 30 s doubling, at most 15 min."""
    delay: timedelta = FIRST_RETRY_DELAY * (2 ** min(max(attempts - 1, 0), 10))
    return now + min(delay, MAX_RETRY_DELAY)


@dataclass(frozen=True)
class Alert:
    """One outbox row, as the sender and the read side see it."""

    id: str
    event: str
    severity: Severity
    at: datetime
    summary: str
    status: EventStatus
    schedule: str | None = None
    run_id: int | None = None
    key: str | None = None
    business_key: str | None = None
    details: Mapping[str, Any] | None = None
    attempts: int = 0
    next_try_at: datetime | None = None
    delivered_at: datetime | None = None
    last_error: str | None = None


def payload(alert: Alert) -> dict[str, Any]:
    """The webhook body (SPEC §15.1): ``id``, ``event``, ``severity``, ``at``, ``summary`` and what applies."""
    body: dict[str, Any] = {"id": alert.id, "event": alert.event, "severity": alert.severity.value,
                            "at": format_instant(alert.at), "summary": alert.summary}
    for name in ("schedule", "run_id", "key", "business_key"):
        value = getattr(alert, name)
        if value is not None:
            body[name] = value
    for name, value in (alert.details or {}).items():
        body.setdefault(name, value)
    return body


def title(alert: Alert) -> str:
    """The Apprise title: ``reportflow: <event> <schedule>``."""
    return f"reportflow: {alert.event} {alert.schedule or ''}".rstrip()


def body_text(alert: Alert) -> str:
    """The Apprise body: the summary, then the key."""
    key = alert.key or alert.business_key
    return alert.summary if key is None else f"{alert.summary}\n{key}"
