"""Operator notifications: a JSON POST to the webhook whose URL is in the variable ``[notify] webhook_env`` names.

Sent on FAILED, MISSED, MANUAL_REQUIRED, stalled and silent. Best effort: a
webhook that is down is logged and never fails the run or the tick. The URL
is a secret (webhook URLs carry tokens): it is never logged or stored.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from typing import Any

log = logging.getLogger(__name__)
TIMEOUT_S = 5.0


class Notifier:
    def __init__(self, webhook_env: str) -> None:
        self.webhook_env = webhook_env

    @property
    def url(self) -> str | None:
        return os.environ.get(self.webhook_env) if self.webhook_env else None

    def send(self, event: str, **fields: Any) -> bool:
        """POST ``{"event": ..., **fields}``; returns whether the webhook accepted it."""
        url = self.url
        if not url:
            return False
        body = json.dumps({"event": event, **fields}, default=str).encode()
        request = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                ok = bool(200 <= response.status < 300)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            log.warning("notify_failed event=%s variable=%s reason=%s", event, self.webhook_env,
                        type(exc).__name__)
            return False
        log.info("notified event=%s", event)
        return ok
