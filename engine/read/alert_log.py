"""Read side of the alert outbox: what was raised, and whether it was delivered (``notifications list``, the page)."""

from __future__ import annotations

from typing import Any

from engine.core import alerts
from engine.core.clock import format_instant
from engine.runtime import Runtime
from engine.store import outbox


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
