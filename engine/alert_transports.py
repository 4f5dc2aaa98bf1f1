"""The transports of alerts: a JSON POST to the webhook, and Apprise for chat, e-mail and push.

The URLs live in the variables ``[notify] webhook_env`` and ``apprise_env`` name; they
are secrets (webhook and Apprise URLs carry tokens) and are never logged or stored.
Nothing here touches the database: the outbox (``engine.store.outbox``) and the sender
(``engine.operations.outbox_sender``) decide what is sent and when. A send never raises:
it returns the reason it failed, or None: a refused connection, a timeout, a protocol
error (a garbage status line, a malformed header) and a non-2xx answer alike.

Every send has an overall deadline, not only a per-read timeout (a receiver that sends
one byte every few seconds never trips the latter): ``WEBHOOK_DEADLINE_S`` for the POST
(``engine.core.http_deadline``), ``APPRISE_DEADLINE_S`` for Apprise, which owns its
sockets, so its notify runs in a daemon thread that is stopped waiting for at the deadline.
Redirects are not followed, by either (a 3xx is a failure: a target that moved must be
reconfigured, not chased to wherever it points). A webhook URL's ``user:password@`` is
sent as HTTP Basic authentication.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from prometheus_client import Counter

log = logging.getLogger(__name__)
T = TypeVar("T")
TIMEOUT_S = 5.0  # per read
WEBHOOK_DEADLINE_S = 10.0  # the whole POST: connect, send, status line, headers, body
APPRISE_DEADLINE_S = 15.0  # every Apprise URL of one event together
# Apprise's notify type for each severity (SPEC §15.1: info / warning / failure).
APPRISE_TYPES = {"info": "info", "warning": "warning", "critical": "failure"}


class AlertTransports:
    """The webhook and Apprise targets of this process, and its count of failed sends (by event)."""

    def __init__(self, webhook_env: str, apprise_env: str = "", *, timeout_s: float = TIMEOUT_S,
                 webhook_deadline_s: float = WEBHOOK_DEADLINE_S,
                 apprise_deadline_s: float = APPRISE_DEADLINE_S) -> None:
        self.webhook_env = webhook_env
        self.apprise_env = apprise_env
        self.timeout_s = timeout_s
        self.webhook_deadline_s = webhook_deadline_s
        self.apprise_deadline_s = apprise_deadline_s

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
        """POST ``body`` as JSON to the webhook; None when it answered 2xx, else a short reason (no URL).

        Ends within ``webhook_deadline_s`` whatever the receiver does; a redirect is not followed.
        """
        url = self.url
        if url is None:
            return None
        import httpx

        from engine.core import http_deadline

        try:
            with http_deadline.client(self.webhook_deadline_s, timeout_s=self.timeout_s, follow_redirects=False,
                                      max_bytes=http_deadline.WEBHOOK_MAX_BYTES) as client:
                # httpx sends a URL's user:password@ as Basic authentication (urllib dropped it).
                status = client.post(url, content=json.dumps(body, default=str).encode(),
                                     headers={"Content-Type": "application/json",
                                              "User-Agent": "reportflow-alerts"}).status_code
        except httpx.HTTPError as exc:  # refused, timed out, a garbage status line, too many headers...
            return type(exc).__name__
        except Exception as exc:  # noqa: BLE001 - an invalid URL or any other surprise is a failed send
            return type(exc).__name__
        return None if 200 <= status < 300 else f"HTTP {status}"

    def send_apprise(self, title: str, body: str, severity: str) -> str | None:
        """Send through Apprise to every configured URL; None when all accepted, else a short reason.

        Redirects are not followed (``redirect=yes`` on a URL opts back in); the whole send ends
        within ``apprise_deadline_s``.
        """
        urls = self.apprise_urls
        if urls is None:
            return None
        import apprise

        # Sequential and in the calling thread (no Apprise worker pool, whose threads would hold the
        # process at exit after a timeout): the deadline is kept by ``within``'s daemon thread instead.
        asset = apprise.AppriseAsset(http_redirects=False, async_mode=False, service_timeout=0)
        sender = apprise.Apprise(asset=asset)
        if not sender.add([u for u in urls.replace(",", " ").split() if u]):
            return "no Apprise URL could be loaded"

        def notify() -> bool:
            return bool(sender.notify(title=title, body=body,
                                      notify_type=apprise.NotifyType(APPRISE_TYPES[severity])))

        try:
            ok = within(notify, self.apprise_deadline_s)
        except TimeoutError:
            return f"no answer within {self.apprise_deadline_s:g}s"
        except Exception as exc:  # noqa: BLE001 - a plugin's own error is a failed send, never a crash
            return type(exc).__name__
        return None if ok else "Apprise refused"

    def count_failure(self, event: str) -> None:
        """Count one failed send of ``event`` (``reportflow_notification_failures_total``)."""
        self.failures.labels(event=event).inc()


def within(fn: Callable[[], T], deadline_s: float) -> T:
    """``fn()`` in a daemon thread, waited for at most ``deadline_s`` (TimeoutError after).

    For a library that owns its sockets (Apprise: alerts here, report deliveries in
    ``steps.delivery_send``): a send past its deadline is left to end on its own, and a daemon
    thread never holds the process at exit.
    """
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="apprise", daemon=True)
    thread.start()
    thread.join(deadline_s)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {deadline_s:g}s")
    if failure:
        raise failure[0]
    return outcome[0]
