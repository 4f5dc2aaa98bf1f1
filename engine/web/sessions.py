"""Logged-in sessions and the failed-login limit, held in the memory of the ui process.

The cookie carries a random session id and the CSRF token, nothing derived from the
write token; the id maps here to who logged in and until when. Logout forgets the id,
so a saved copy of the old cookie no longer acts; a session ends after ``[ui] session_ttl``.
Why memory and not the database: docs/DESIGN.md "Web sessions".

``decide_login_block`` is the pure decision of a limit; ``LoginLimiter`` holds the failed
token attempts per client address and across all of them (one address per guess is no way
around it), and ``EventLimiter`` the drafts of each session.
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
#: Failed token attempts from every address together, within ``FAILURE_WINDOW``: past this,
#: ``/login`` (and ``/metrics``) answer 429 to everyone until the window passes.
GLOBAL_MAX_FAILURES = 20
#: Schedule drafts per logged-in session (each may ask the model): at most this many per window.
DRAFTS_PER_WINDOW = 5
DRAFT_WINDOW = timedelta(minutes=1)
#: "Run now" and "regenerate" per session per minute: each may queue a run (a revision replaces a report).
TRIGGERS_PER_WINDOW = 10
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


def decide_login_block(failures: Iterable[datetime], now: datetime, *, limit: int = MAX_FAILURES,
                       window: timedelta = FAILURE_WINDOW) -> timedelta | None:
    """How long a limit stays closed after events at these instants (None: open).

    Closed once ``limit`` of them fall within the last ``window``, until the oldest of
    those leaves the window. The login limit (``MAX_FAILURES`` per address, and
    ``GLOBAL_MAX_FAILURES`` in all) and the draft limit per session both ask it.
    """
    recent = sorted(at for at in failures if now - at < window)
    if len(recent) < limit:
        return None
    return recent[-limit] + window - now


class EventLimiter:
    """Events per key (an address, a session) within a window, at most ``limit``; thread-safe."""

    def __init__(self, limit: int, window: timedelta, *, max_keys: int = MAX_ADDRESSES) -> None:
        self.limit = limit
        self.window = window
        self.max_keys = max_keys
        self._events: dict[str, deque[datetime]] = {}
        self._lock = threading.Lock()

    def blocked_for(self, key: str, now: datetime) -> timedelta | None:
        """How long ``key`` must wait before the next event (None: it may go now)."""
        with self._lock:
            return decide_login_block(self._events.get(key, ()), now, limit=self.limit, window=self.window)

    def record(self, key: str, now: datetime) -> None:
        """Count one event of ``key`` at ``now``."""
        with self._lock:
            if key not in self._events and len(self._events) >= self.max_keys:
                self._events.pop(next(iter(self._events)))
            self._events.setdefault(key, deque(maxlen=self.limit)).append(now)


class LoginLimiter:
    """Failed token attempts: per client address, and across every address (the global limit)."""

    def __init__(self) -> None:
        self._per_address = EventLimiter(MAX_FAILURES, FAILURE_WINDOW)
        self._everyone = EventLimiter(GLOBAL_MAX_FAILURES, FAILURE_WINDOW, max_keys=1)

    def blocked_for(self, address: str, now: datetime) -> timedelta | None:
        """How long ``address`` must wait before trying again (None: it may try now)."""
        waits = [wait for wait in (self._per_address.blocked_for(address, now),
                                   self._everyone.blocked_for("*", now)) if wait is not None]
        return max(waits) if waits else None

    def record_failure(self, address: str, now: datetime) -> None:
        """Count a failed attempt from ``address`` at ``now``, for it and for everyone."""
        self._per_address.record(address, now)
        self._everyone.record("*", now)
