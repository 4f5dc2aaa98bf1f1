"""One message to one delivery target through Apprise, and what became of it: sent, clearly not taken, or unknown.

A target is the name of an environment variable and the one Apprise URL it holds (``slack://``,
``mailto://``, ``json://``...); the URL carries a token, so it is never logged, stored or shown
(``Target``'s repr leaves it out, and every reason given back is written here, never Apprise's text).

Apprise answers a send with yes or no. A no is split here into what the ledger needs:

- **clearly not taken** (``FAILED``, may be sent again): nobody listened at the target's address
  before anything was sent (a TCP connect made just before the send is refused, or its name does not
  resolve), or the target answered with a status that refuses the message (HTTP 4xx and 503, from
  the line Apprise logs for it: ``error=429``). Each comes with its step error code.
- **unknown** (``UNCONFIRMED``, never sent again by itself): anything else, such as a connection dropped
  after the message was written, no answer within the deadline, another 5xx, an SMTP failure, or an
  Apprise that logs in words this module does not know. A change in Apprise's wording can only make
  more sends unknown, never send one twice.

Apprise's own retries are turned off (a target's ``?retry=`` would resend what may have arrived) and
its overflow mode is ``truncate`` (``split`` would make several messages); the caller fits the message
to ``limits`` first. The send runs in a daemon thread waited for ``deadline_s`` at most
(``alert_transports.within``), so a target that dribbles its answer holds nothing.
"""

from __future__ import annotations

import re
import socket
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.alert_transports import within
from engine.core import errors
from engine.core.deliveries import DeliveryState, SendOutcome
from steps.report_brief import Message

#: A pre-send connect's longest wait (seconds), within the send's deadline.
CONNECT_TIMEOUT_S = 5.0
#: The status Apprise's HTTP plugins log for a refused send: "Failed to send … notification: … error=429."
ANSWERED = re.compile(r"\berror=(?P<status>[1-5][0-9]{2})\b")
#: Statuses that say the target did not take the message and may later (the rest of 4xx: it never will as is).
TRY_LATER = {429: "DELIVERY_RATE_LIMITED", 503: "DELIVERY_UNAVAILABLE"}


@dataclass(frozen=True)
class Target:
    """A delivery target: the variable's name (what is stored and shown) and its URL (a secret: not in repr)."""

    name: str
    url: str = field(repr=False)


@dataclass(frozen=True)
class Limits:
    """The largest title and body the target takes (0 title: it has none)."""

    title_chars: int
    body_chars: int


@dataclass(frozen=True)
class Verdict:
    """What became of a send: the ledger's outcome and, when the target clearly did not take it, the step's code."""

    outcome: SendOutcome
    code: str | None = None

    @property
    def state(self) -> DeliveryState:
        return self.outcome.state


@dataclass(frozen=True)
class Loaded:
    """A target's Apprise service, ready to send (retries off, no split)."""

    target: Target
    service: Any = field(repr=False)
    asset: Any = field(repr=False)

    @property
    def limits(self) -> Limits:
        return Limits(int(getattr(self.service, "title_maxlen", 0) or 0),
                      int(getattr(self.service, "body_maxlen", 0) or 0))


def load(target: Target) -> Loaded:
    """The Apprise service of ``target``'s URL; ``DELIVERY_TARGET_INVALID`` when the variable is unset, holds
    more than one URL, or holds one Apprise cannot send to (the message names the variable, never the URL)."""
    import apprise

    url = target.url.strip()
    if not url:
        raise errors.step_error("DELIVERY_TARGET_INVALID", f"the environment variable {target.name} "
                                "(deliveries.to_env) is not set")
    if len(url.split()) != 1:
        raise errors.step_error("DELIVERY_TARGET_INVALID", f"the environment variable {target.name} holds more "
                                "than one URL: give each target its own variable")
    asset = apprise.AppriseAsset(http_redirects=False, async_mode=False, service_timeout=0)
    service = apprise.Apprise.instantiate(url, asset=asset)
    if service is None:
        raise errors.step_error("DELIVERY_TARGET_INVALID", f"the URL in {target.name} is not one Apprise can send "
                                "to (check its scheme and parameters)")
    if hasattr(service, "retry"):
        service.retry = 0  # a retry inside Apprise would send again what may have arrived
    service.overflow_mode = apprise.common.OverflowMode.TRUNCATE
    return Loaded(target, service, asset)


def endpoint(service: Any) -> tuple[str, int] | None:
    """The host and port a service connects to first, when it can be told: an SMTP server, a JSON/XML/form
    receiver, or a service with one fixed API address; None otherwise (then no connect is made first)."""
    smtp = getattr(service, "smtp_host", None)
    if smtp:
        port = getattr(service, "port", None)
        return (str(smtp), int(port)) if port else None
    host = getattr(service, "host", None)
    if getattr(service, "protocol", None) in ("json", "xml", "form") and host:
        port = getattr(service, "port", None) or (443 if getattr(service, "secure", False) else 80)
        return str(host), int(port)
    fixed = getattr(type(service), "notify_url", None)
    if isinstance(fixed, str) and "{" not in fixed:
        parts = urllib.parse.urlsplit(fixed)
        if parts.hostname:
            return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    return None


def unreachable(service: Any, timeout_s: float) -> str | None:
    """Why nobody listens at the service's address now (a refused connect, a name that does not resolve),
    or None when a connection was made or the address cannot be told."""
    address = endpoint(service)
    if address is None:
        return None
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return None
    except ConnectionRefusedError:
        return "the connection was refused: nothing was sent"
    except socket.gaierror:
        return "its host name does not resolve: nothing was sent"
    except OSError:
        return None  # a timeout or an unreachable network: let the send itself tell


def classify(accepted: bool, logged: Iterable[str], *, timed_out: bool = False, deadline_s: float = 0.0,
             crashed: str | None = None) -> Verdict:
    """What became of a send from what Apprise said: its yes or no, and the lines it logged for the send."""
    if accepted:
        return Verdict(SendOutcome(DeliveryState.SENT))
    if timed_out:
        return Verdict(SendOutcome(DeliveryState.UNCONFIRMED, f"no answer within {deadline_s:g}s: it may have "
                                                              "arrived"))
    if crashed:
        return Verdict(SendOutcome(DeliveryState.UNCONFIRMED, f"the send raised {crashed}: it may have arrived"))
    statuses = [int(m["status"]) for line in logged for m in ANSWERED.finditer(line)]
    status = statuses[-1] if statuses else None
    if status is not None and status in TRY_LATER:
        return Verdict(SendOutcome(DeliveryState.FAILED, f"the target answered {status}: it did not take the "
                                                         "message"), TRY_LATER[status])
    if status is not None and 300 <= status < 500:
        return Verdict(SendOutcome(DeliveryState.FAILED, f"the target answered {status}: it refused the message "
                                                         "(check the URL and its token)"), "DELIVERY_REFUSED")
    what = f"the target answered {status}" if status is not None else "the send failed without an answer"
    return Verdict(SendOutcome(DeliveryState.UNCONFIRMED, f"{what}: it may have arrived"))


def send(loaded: Loaded, message: Message, *, deadline_s: float) -> Verdict:
    """Send ``message`` to ``loaded``'s target once, within ``deadline_s``; never raises."""
    import apprise

    down = unreachable(loaded.service, min(CONNECT_TIMEOUT_S, deadline_s))
    if down is not None:
        return Verdict(SendOutcome(DeliveryState.FAILED, down), "DELIVERY_UNAVAILABLE")
    sender = apprise.Apprise(asset=loaded.asset)
    sender.add(loaded.service)

    def notify() -> Any:
        return sender.notify(title=message.title, body=message.body, body_format=apprise.NotifyFormat.MARKDOWN,
                             notify_type=apprise.NotifyType.INFO)

    try:
        result = within(notify, deadline_s)
    except TimeoutError:
        return classify(False, (), timed_out=True, deadline_s=deadline_s)
    except Exception as exc:  # noqa: BLE001 - a plugin's own error: the message may have gone out
        return classify(False, (), crashed=type(exc).__name__)
    status = getattr(getattr(result, "status", None), "name", None)
    if status == "NOMATCH":  # Apprise dispatched nothing
        return Verdict(SendOutcome(DeliveryState.FAILED, "Apprise sent nothing to it"), "DELIVERY_TARGET_INVALID")
    logs = getattr(result, "logs", None)  # Apprise 2: the lines logged for this call; 1.x answers a bool only
    lines = [str(getattr(entry, "message", "")) for entry in logs()] if callable(logs) else []
    return classify(bool(result), lines, timed_out=status == "TIMEOUT", deadline_s=deadline_s)
