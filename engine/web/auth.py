"""The page's security model: read-only without a token; with one, a login that opens a
server-side session, CSRF on every form, and a limit on failed logins.

- The write token comes from the environment variable named by ``[ui] token_env``;
  without it the page is read-only and every POST is refused (403). A token shorter
  than ``MIN_TOKEN_LENGTH``, or made of fewer than ``MIN_DISTINCT`` different characters
  (16 spaces, ``aaaaaaaaaaaaaaaa``), is refused at start (exit 2).
- ``/login`` compares the submitted token with ``hmac.compare_digest`` and opens a
  session (``engine.web.sessions``); the signed, HttpOnly, SameSite=Strict cookie holds
  only the random session id and the CSRF token, no digest of the token.
- Every form carries the session's CSRF token; a POST without the matching one is refused.
- Binding to a non-loopback address without a token is refused (exit 2).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import secrets
from collections.abc import MutableMapping
from datetime import datetime
from typing import Any

from engine.core import errors
from engine.web import sessions

CSRF_FIELD = "csrf_token"
MIN_TOKEN_LENGTH = 16
MIN_DISTINCT = 4
_LOGIN_NAME = re.compile(r"[^A-Za-z0-9_.@-]")


def read_token(env_name: str) -> str | None:
    """The write token from the environment (None when unset or empty)."""
    value = os.environ.get(env_name, "")
    return value or None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


_MAKE_ONE = "use a long random one (python -c 'import secrets; print(secrets.token_urlsafe(24))')"


def check_token(token: str | None, token_env: str) -> None:
    """Refuse (exit 2) a token short or plain enough to guess online."""
    if token is None:
        return
    if len(token) < MIN_TOKEN_LENGTH:
        raise errors.InvalidInput(f"{token_env} is shorter than {MIN_TOKEN_LENGTH} characters; {_MAKE_ONE}")
    if len(set(token)) < MIN_DISTINCT or not token.strip():
        raise errors.InvalidInput(f"{token_env} is weak: it repeats fewer than {MIN_DISTINCT} different "
                                  f"characters; {_MAKE_ONE}")


def check_bind(host: str, token: str | None, token_env: str) -> None:
    """A page reachable from other machines must not be writable without a token: refuse (exit 2)."""
    check_token(token, token_env)
    if token is None and not is_loopback(host):
        raise errors.InvalidInput(f"refusing to bind the page to {host} without a token: set {token_env} "
                                  "(or bind to 127.0.0.1)")


def session_secret() -> str:
    """The cookie-signing key: random per process (a restart logs everyone out)."""
    return secrets.token_hex(32)


def _same(a: str, b: str) -> bool:
    """Constant-time equality of any two texts (non-ASCII included)."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def token_matches(candidate: str, token: str | None) -> bool:
    """Whether the submitted ``candidate`` is the write token."""
    return token is not None and _same(candidate, token)


def csrf_token(session: MutableMapping[str, Any]) -> str:
    """The session's CSRF token, made on first use."""
    value = session.get("csrf")
    if not isinstance(value, str):
        value = secrets.token_urlsafe(32)
        session["csrf"] = value
    return value


def csrf_ok(session: MutableMapping[str, Any], submitted: str | None) -> bool:
    """Whether ``submitted`` is the session's CSRF token."""
    expected = session.get("csrf")
    return isinstance(expected, str) and submitted is not None and _same(expected, submitted)


def current(cookie: MutableMapping[str, Any], store: sessions.SessionStore, token: str | None,
            now: datetime) -> sessions.Session | None:
    """The live server-side session this cookie names, or None (read-only page, logged out, expired)."""
    if token is None:
        return None
    return store.get(cookie.get("sid"), now)


def actor(session: sessions.Session | None) -> str:
    """``ui`` or ``ui:<login>`` for the audit trail."""
    return f"ui:{session.login}" if session is not None and session.login else "ui"


def log_in(cookie: MutableMapping[str, Any], store: sessions.SessionStore, login: str, now: datetime) -> None:
    """Open a session for ``login`` and point the cookie at it, with a fresh CSRF token."""
    store.revoke(cookie.get("sid"))
    cookie.clear()
    cookie["sid"] = store.open(_LOGIN_NAME.sub("", login)[:64], now)
    cookie["csrf"] = secrets.token_urlsafe(32)


def log_out(cookie: MutableMapping[str, Any], store: sessions.SessionStore) -> None:
    """Revoke the session server-side and clear the cookie."""
    store.revoke(cookie.get("sid"))
    cookie.clear()
