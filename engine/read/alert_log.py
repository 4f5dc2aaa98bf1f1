"""Read side of the alert outbox: what was raised, and whether it was delivered (``notifications list``, the
schedule page, the alerts page)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core import alerts
from engine.core.clock import format_instant
from engine.runtime import Runtime
from engine.store import alert_rows, outbox


def list_notifications(rt: Runtime, *, pending_only: bool = False, schedule: str | None = None,
                       limit: int = 50) -> list[alerts.Alert]:
    """Recorded alerts, newest first; ``pending_only``: those not delivered yet."""
    with rt.store.read() as conn:
        return outbox.list_events(conn, pending_only=pending_only, schedule=schedule, limit=limit)


def notification_view(alert: alerts.Alert) -> dict[str, Any]:
    """One alert as ``notifications list --json`` and ``/api/`` give it: the webhook body plus its delivery."""
    return {**alerts.payload(alert), "status": alert.status.value, "attempts": alert.attempts,
            "next_try_at": format_instant(alert.next_try_at), "delivered_at": format_instant(alert.delivered_at),
            "last_error": alert.last_error}


def delivery_of(alert: alerts.Alert) -> str:
    """An alert's delivery state as the alerts page names it (one of ``alert_rows.DELIVERY_STATES``)."""
    if alert.status is alerts.EventStatus.DELIVERED:
        return "sent"
    if alert.status is alerts.EventStatus.QUIET:
        return "quiet"
    return "failed" if alert.attempts else "pending"


@dataclass(frozen=True)
class AlertPage:
    """One page of the alerts page: the alerts, the cursor of the next (older) page, and what waits overall."""

    alerts: list[alerts.Alert]
    next_before: int | None
    waiting: dict[str, int]  # delivery state -> events in it, over every schedule
    schedules: list[str]  # every schedule an alert names, for the filter


def page_alerts(rt: Runtime, filt: alert_rows.AlertFilter, *, before: int | None, limit: int) -> AlertPage:
    """Alerts matching ``filt``, newest first, older than row ``before``; ``limit`` per page."""
    with rt.store.read() as conn:
        found = alert_rows.list_alerts(conn, filt, before_id=before, limit=limit + 1)
        waiting = alert_rows.delivery_counts(conn)
        names = alert_rows.alert_schedules(conn)
    shown = found[:limit]
    next_before = shown[-1][0] if len(found) > limit else None
    return AlertPage([alert for _, alert in shown], next_before, waiting, names)
