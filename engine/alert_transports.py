"""The transports of alerts: a JSON POST to the webhook, and Apprise for chat, e-mail and push.

The URLs live in the variables ``[notify] webhook_env`` and ``apprise_env`` name; they
are secrets (webhook and Apprise URLs carry tokens) and are never logged or stored.
Nothing here touches the database: the outbox (``engine.store.outbox``) and the sender
(``engine.operations.outbox_sender``) decide what is sent and when. A send never raises:
it returns the reason it failed, or None. Redirects are not followed (a 3xx is a failure:
a webhook that moved must be reconfigured, not chased to wherever it points).
"""

from __future__ import annotations

import json
import logging
import os
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import urllib.request

    from prometheus_client import Counter

log = logging.getLogger(__name__)
TIMEOUT_S = 5.0
# Apprise's notify type for each severity (SPEC §15.1: info / warning / failure).
APPRISE_TYPES = {"info": "info", "warning": "warning", "critical": "failure"}


class AlertTransports:
    """The webhook and Apprise targets of this process, and its count of failed sends (by event)."""

    def __init__(self, webhook_env: str, apprise_env: str = "", *, timeout_s: float = TIMEOUT_S) -> None:
        self.webhook_env = webhook_env
        self.apprise_env = apprise_env
        self.timeout_s = timeout_s

    @cached_property
    def failures(self) -> Counter:
        """Failed sends by event; prometheus_client is imported on first use (not by a cron ``tick``).

        Not in prometheus_client's global registry: the metrics exposition registers it itself.
        """
        from prometheus_client import Counter

        return Counter("reportflow_notification_failures", "Alert sends that did not succeed.",
                       labelnames=["event"], registry=None)

    @property
    def url(self) -> str | None:
        """The webhook URL, or None when no variable is named or it is empty."""
        return os.environ.get(self.webhook_env) or None if self.webhook_env else None

    @property
    def apprise_urls(self) -> str | None:
        """The Apprise URLs (space or comma separated), or None."""
        return os.environ.get(self.apprise_env) or None if self.apprise_env else None

    @property
    def has_targets(self) -> bool:
        """Whether any target is configured (without one, events stay recorded and pending)."""
        return self.url is not None or self.apprise_urls is not None

    def post_webhook(self, body: dict[str, Any]) -> str | None:
        """POST ``body`` as JSON to the webhook; None when it answered 2xx, else a short reason (no URL)."""
        url = self.url
        if url is None:
            return None
        import urllib.error
        import urllib.request

        request = urllib.request.Request(url, data=json.dumps(body, default=str).encode(), method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "User-Agent": "reportflow-alerts"})
        try:
            with _opener().open(request, timeout=self.timeout_s) as response:
                status = int(response.status)
        except urllib.error.HTTPError as exc:  # 3xx (redirects are not followed), 4xx, 5xx
            return f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return type(exc).__name__
        return None if 200 <= status < 300 else f"HTTP {status}"

    def send_apprise(self, title: str, body: str, severity: str) -> str | None:
        """Send through Apprise to every configured URL; None when all accepted, else a short reason."""
        urls = self.apprise_urls
        if urls is None:
            return None
        import apprise

        sender = apprise.Apprise()
        if not sender.add([u for u in urls.replace(",", " ").split() if u]):
            return "no Apprise URL could be loaded"
        try:
            ok = sender.notify(title=title, body=body, notify_type=apprise.NotifyType(APPRISE_TYPES[severity]))
        except Exception as exc:  # noqa: BLE001 - a plugin's own error is a failed send, never a crash
            return type(exc).__name__
        return None if ok else "Apprise refused"

    def count_failure(self, event: str) -> None:
        """Count one failed send of ``event`` (``reportflow_notification_failures_total``)."""
        self.failures.labels(event=event).inc()


def _opener() -> urllib.request.OpenerDirector:
    """A urllib opener that follows no redirect: a 3xx surfaces as an HTTPError."""
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return urllib.request.build_opener(NoRedirect)
