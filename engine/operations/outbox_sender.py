"""The alert sender (SPEC §15.1): deliver the outbox's pending events, at least once, with backoff.

Reads the due events in a read transaction, sends each to the webhook and Apprise
with no transaction open, then records the outcomes in one short write transaction.
An event is marked delivered only when every configured target accepted it, so a
crash before that mark sends it again (receivers drop repeats by ``id``). A target
that fails ends the pass (the rest wait for the next one, in order); the failed event
is tried again after a backoff of at most 15 minutes: whatever the failure, a refusal,
a timeout or a protocol error, it is recorded as a failed attempt. Never raises: a
sender failure never ends a worker or ``serve``.

A pass is bounded: each send ends within its transport's deadline
(``engine.alert_transports``), and a pass starts no new send after ``PASS_BUDGET_S``,
or after ``STOPPING_BUDGET_S`` once its process is stopping (SIGTERM): what is left
stays in the outbox for the next pass of any process.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from engine.core import alerts, clock, errors, logs
from engine.runtime import Runtime
from engine.store import outbox

log = logging.getLogger(__name__)
BATCH = 100
PASS_BUDGET_S = 30.0  # no new send starts after this long in one pass
STOPPING_BUDGET_S = 5.0  # ... or after this long once the process is stopping


@dataclass
class DeliveryReport:
    delivered: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    error: str | None = None  # the pass itself failed (the database): logged, tried again next time


def deliver_pending(rt: Runtime, *, limit: int = BATCH, stop: threading.Event | None = None) -> DeliveryReport:
    """Send the pending events due now to every configured target and mark them; never raises.

    Starts no new send past ``PASS_BUDGET_S`` (``STOPPING_BUDGET_S`` once ``stop`` is set).
    """
    report = DeliveryReport()
    transports = rt.transports
    if not transports.has_targets:
        return report  # recorded, shown by `notifications list`; sent once a target is configured
    try:
        now = rt.clock.now()
        with rt.store.read() as conn:
            due = outbox.list_due(conn, now, limit=limit)
        outcomes: list[tuple[int, alerts.Alert, str | None]] = []
        started = clock.REAL.monotonic()  # sends take real time, whatever clock the runtime simulates
        for row_id, alert in due:
            budget = STOPPING_BUDGET_S if stop is not None and stop.is_set() else PASS_BUDGET_S
            if outcomes and clock.REAL.monotonic() - started > budget:
                break  # the rest wait for the next pass
            try:
                reason = _send(rt, alert)
            except Exception as exc:  # noqa: BLE001 - whatever a transport raised is a failed attempt
                reason = f"{type(exc).__name__}"
            outcomes.append((row_id, alert, reason))
            if reason is not None:
                break
        if not outcomes:
            return report
        done_at = rt.clock.now()
        with rt.store.write() as conn:
            for row_id, alert, reason in outcomes:
                if reason is None:
                    outbox.mark_delivered(conn, row_id, done_at)
                else:
                    attempts = alert.attempts + 1
                    outbox.mark_failed(conn, row_id, attempts=attempts,
                                       next_try_at=alerts.decide_alert_retry_at(attempts, done_at), error=reason)
    except Exception as exc:  # noqa: BLE001 - the sender must never take its caller down
        report.error = errors.first_line(exc)
        logs.event(log, logging.WARNING, "delivery_failed", error=report.error)
        return report
    for _row_id, alert, reason in outcomes:
        if reason is None:
            report.delivered.append(alert.id)
            logs.event(log, logging.INFO, "notified", notified=alert.event, id=alert.id)
        else:
            report.failed.append(alert.id)
            transports.count_failure(alert.event)
            logs.event(log, logging.WARNING, "notify_failed", notified=alert.event, id=alert.id, reason=reason,
                       attempt=alert.attempts + 1)
    return report


def _send(rt: Runtime, alert: alerts.Alert) -> str | None:
    """Send one event to the webhook, then Apprise; the first failure's reason, or None."""
    transports = rt.transports
    reason = transports.post_webhook(alerts.payload(alert))
    if reason is not None:
        return f"webhook: {reason}"
    reason = transports.send_apprise(alerts.title(alert), alerts.body_text(alert), alert.severity.value)
    return None if reason is None else f"apprise: {reason}"


def deliver_until(rt: Runtime, stop: threading.Event, *, every_s: float = 5.0) -> None:
    """Deliver every ``every_s`` until ``stop`` is set (a long ``work`` loop's sender thread), then once more
    within ``STOPPING_BUDGET_S``."""
    while not stop.is_set():
        deliver_pending(rt, stop=stop)
        rt.clock.wait(every_s, stop)
    deliver_pending(rt, stop=stop)

