"""The page's security model: read-only without a token, a signed session and CSRF with one.

- The write token comes from the environment variable named by ``[ui] token_env``;
  without it the page is read-only and every POST is refused (403).
- ``/login`` compares the submitted token with ``hmac.compare_digest`` and marks the
  session (a signed, HttpOnly, SameSite=Strict cookie) with a fingerprint of the token,
  so changing the token logs every session out.
- Every form carries the session's CSRF token; a POST without the matching one is refused.
- Binding to a non-loopback address without a token is refused (exit 2).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import secrets
from collections.abc import MutableMapping
from typing import Any

from engine.core import errors

CSRF_FIELD = "csrf_token"
_LOGIN_NAME = re.compile(r"[^A-Za-z0-9_.@-]")


def read_token(env_name: str) -> str | None:
    """The write token from the environment (None when unset or empty)."""
    value = os.environ.get(env_name, "")
    return value or None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``): only this machine can reach it."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, token_env: str) -> None:
    """A page reachable from other machines must not be writable without a token: refuse (exit 2)."""
    if token is None and not is_loopback(host):
        raise errors.InvalidInput(f"refusing to bind the page to {host} without a token: set {token_env} "
                                  "(or bind to 127.0.0.1)")


def fingerprint(token: str) -> str:
    """What the session stores of the token: a digest, never the token."""
    return hashlib.sha256(b"reportflow-ui:" + token.encode()).hexdigest()[:32]


def session_secret(token: str | None) -> str:
    """The cookie-signing key: random per process, bound to the token when there is one."""
    return hashlib.sha256(secrets.token_bytes(32) + (token or "").encode()).hexdigest()


def token_matches(candidate: str, token: str | None) -> bool:
    """Whether ``candidate`` is the token (constant time)."""
    return token is not None and hmac.compare_digest(candidate.encode(), token.encode())


def csrf_token(session: MutableMapping[str, Any]) -> str:
    """The session's CSRF token, made on first use."""
    value = session.get("csrf")
    if not isinstance(value, str):
        value = secrets.token_urlsafe(32)
        session["csrf"] = value
    return value


def csrf_ok(session: MutableMapping[str, Any], submitted: str | None) -> bool:
    """Whether a submitted form carries this session's CSRF value."""
    expected = session.get("csrf")
    return isinstance(expected, str) and submitted is not None and hmac.compare_digest(expected, submitted)


def logged_in(session: MutableMapping[str, Any], token: str | None) -> bool:
    """Whether this session logged in with the current token."""
    return token is not None and session.get("auth") == fingerprint(token)


def actor(session: MutableMapping[str, Any]) -> str:
    """``ui`` or ``ui:<login>`` for the audit trail."""
    login = session.get("login")
    return f"ui:{login}" if isinstance(login, str) and login else "ui"


def log_in(session: MutableMapping[str, Any], token: str, login: str) -> None:
    """Mark the session logged in (token fingerprint and login name)."""
    session["auth"] = fingerprint(token)
    session["login"] = _LOGIN_NAME.sub("", login)[:64]
    session["csrf"] = secrets.token_urlsafe(32)  # a fresh CSRF token per login


def log_out(session: MutableMapping[str, Any]) -> None:
    """Forget the session."""
    session.clear()
