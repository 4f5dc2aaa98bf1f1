"""Logged-in sessions and the failed-login limit, held in the memory of the ui process.

The cookie carries a random session id and the CSRF token, nothing derived from the
write token; the id maps here to who logged in and until when. Logout forgets the id,
so a saved copy of the old cookie no longer acts; a session ends after ``[ui] session_ttl``.
Why memory and not the database: docs/DESIGN.md "Web sessions".

``decide_login_block`` is the pure decision of the limit; ``LoginLimiter`` holds the
failures per client address and asks it.
"""

from __future__ import annotations

import secrets
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

MAX_FAILURES = 5
FAILURE_WINDOW = timedelta(minutes=5)
MAX_SESSIONS = 1000
MAX_ADDRESSES = 10_000


@dataclass(frozen=True)
class Session:
    """A logged-in session: the name given at login and when it ends."""

    login: str
    expires_at: datetime


class SessionStore:
    """Session ids to ``Session``; thread-safe (the page's sync handlers run in a thread pool)."""

    def __init__(self, ttl: timedelta) -> None:
        self.ttl = ttl
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def open(self, login: str, now: datetime) -> str:
        """A new session for ``login`` ending ``ttl`` after ``now``; returns its id."""
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._drop_expired(now)
            while len(self._sessions) >= MAX_SESSIONS:
                self._sessions.pop(next(iter(self._sessions)))  # the oldest
            self._sessions[sid] = Session(login, now + self.ttl)
        return sid

    def get(self, sid: object, now: datetime) -> Session | None:
        """The live session behind ``sid``, or None (unknown, revoked or expired)."""
        if not isinstance(sid, str):
            return None
        with self._lock:
            session = self._sessions.get(sid)
            if session is not None and session.expires_at <= now:
                del self._sessions[sid]
                return None
            return session

    def revoke(self, sid: object) -> None:
        """Forget ``sid``: the cookie that carries it no longer acts."""
        if isinstance(sid, str):
            with self._lock:
                self._sessions.pop(sid, None)

    def _drop_expired(self, now: datetime) -> None:
        for sid in [s for s, session in self._sessions.items() if session.expires_at <= now]:
            del self._sessions[sid]


def decide_login_block(failures: Iterable[datetime], now: datetime) -> timedelta | None:
    """How long ``/login`` stays closed to an address with these failure instants (None: open).

    Closed once ``MAX_FAILURES`` fall within the last ``FAILURE_WINDOW``, until the oldest
    of them leaves the window.
    """
    recent = sorted(at for at in failures if now - at < FAILURE_WINDOW)
    if len(recent) < MAX_FAILURES:
        return None
    return recent[-MAX_FAILURES] + FAILURE_WINDOW - now


class LoginLimiter:
    """Failed logins per client address, within the window; thread-safe."""

    def __init__(self) -> None:
        self._failures: dict[str, deque[datetime]] = {}
        self._lock = threading.Lock()

    def blocked_for(self, address: str, now: datetime) -> timedelta | None:
        """How long ``address`` must wait before trying again (None: it may try now)."""
        with self._lock:
            return decide_login_block(self._failures.get(address, ()), now)

    def record_failure(self, address: str, now: datetime) -> None:
        """Count a failed login from ``address`` at ``now``."""
        with self._lock:
            if address not in self._failures and len(self._failures) >= MAX_ADDRESSES:
                self._failures.pop(next(iter(self._failures)))
            window = self._failures.setdefault(address, deque(maxlen=MAX_FAILURES))
            window.append(now)
