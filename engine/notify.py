"""Operator notifications: a JSON POST to the webhook whose URL is in the variable ``[notify] webhook_env`` names.

Sent on FAILED, MISSED, MANUAL_REQUIRED, stalled and silent. Best effort: a
webhook that is down is logged, counted (``reportflow_notification_failures_total``)
and never fails the run or the tick. Callers send only after their
transaction has committed, never inside one, and nothing is retried: a
webhook that hangs costs the caller its timeout, not the database's write
lock. The URL is a secret (webhook URLs carry tokens): it is never logged or stored.
"""

from __future__ import annotations

import json
import logging
import os
from functools import cached_property
from typing import TYPE_CHECKING, Any

from engine.core import logs

if TYPE_CHECKING:
    from prometheus_client import Counter

log = logging.getLogger(__name__)
TIMEOUT_S = 5.0


class Notifier:
    """Sends notifications and counts the failed deliveries of this process (by event)."""

    def __init__(self, webhook_env: str, *, timeout_s: float = TIMEOUT_S) -> None:
        self.webhook_env = webhook_env
        self.timeout_s = timeout_s

    @cached_property
    def failures(self) -> Counter:
        """Failed deliveries by event; prometheus_client is imported on first use (not by a cron ``tick``).

        Not in prometheus_client's global registry: the metrics exposition registers it itself.
        """
        from prometheus_client import Counter

        return Counter("reportflow_notification_failures", "Webhook notifications that were not delivered.",
                       labelnames=["event"], registry=None)

    @property
    def url(self) -> str | None:
        """The webhook URL from the environment, if configured (a secret: never logged)."""
        return os.environ.get(self.webhook_env) if self.webhook_env else None

    def send(self, event: str, **fields: Any) -> bool:
        """POST ``{"event": ..., **fields}``; returns whether the webhook accepted it.

        Call with no transaction open. A refusal, a timeout or a non-2xx answer
        is logged and counted; it never raises.
        """
        url = self.url
        if not url:
            return False
        import urllib.error
        import urllib.request

        body = json.dumps({"event": event, **fields}, default=str).encode()
        request = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                ok = bool(200 <= response.status < 300)
            reason = None if ok else f"HTTP {response.status}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            ok, reason = False, type(exc).__name__
        if not ok:
            self.failures.labels(event=event).inc()
            logs.event(log, logging.WARNING, "notify_failed", notified=event, variable=self.webhook_env,
                       reason=reason)
            return False
        logs.event(log, logging.INFO, "notified", notified=event)
        return True
