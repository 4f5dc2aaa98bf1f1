"""Clocks: the only module that reads wall time or sleeps.

Everything else takes a ``Clock`` (shells) or a ``now`` value (pure deciders),
so tests drive time with ``ManualClock`` and the CLI can start the clock at an
arbitrary instant (``--now``) that then advances in real time.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

from engine.core import errors, inputs


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """Wait ``seconds``; return True early if ``stop`` was set."""

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """A background loop's pause: until ``stop`` is set or ``seconds`` pass by themselves; True if stopped."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, for measuring durations."""


class SystemClock:
    """Real time, optionally shifted by a constant offset (``--now``)."""

    def __init__(self, offset: timedelta = timedelta(0)) -> None:
        self._offset = offset

    def now(self) -> datetime:
        """The current instant, shifted by the offset."""
        return datetime.now(UTC) + self._offset

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """Wait ``seconds`` of real time, or until ``stop`` is set (then True)."""
        if stop is None:
            time.sleep(max(0.0, seconds))
            return False
        return stop.wait(max(0.0, seconds))

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """Wait until ``stop`` is set (True) or ``seconds`` of real time pass (False)."""
        return stop.wait(max(0.0, seconds))

    def monotonic(self) -> float:
        """Seconds on the system's monotonic clock."""
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to; ``sleep`` advances it instantly."""

    def __init__(self, start: datetime) -> None:
        self._now = to_utc(start)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The instant this clock was set or advanced to."""
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward by ``delta``; returns the new instant."""
        with self._lock:
            self._now += delta
            return self._now

    def set(self, instant: datetime) -> None:
        """Set the clock to ``instant`` (aware, any zone)."""
        with self._lock:
            self._now = to_utc(instant)

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """Advance by ``seconds`` at once, unless ``stop`` is set already (then True)."""
        if stop is not None and stop.is_set():
            return True
        self.advance(timedelta(seconds=max(0.0, seconds)))
        return False

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """Manual time does not pass by itself: a background loop (a heartbeat, an idle poll) waits for ``stop``."""
        stop.wait()
        return True

    def monotonic(self) -> float:
        """The manual instant as seconds (moves only when the clock does)."""
        return self.now().timestamp()


# Real time whatever the runtime simulates: group commit windows, a server's start-up, file stamps.
REAL = SystemClock()


def to_utc(instant: datetime) -> datetime:
    """Normalise an aware datetime to UTC; naive values are refused."""
    if instant.tzinfo is None:
        raise ValueError(f"naive datetime {instant!r}: every instant must carry a zone")
    return instant.astimezone(UTC)


def clock_from_spec(spec: str | None) -> Clock:
    """Build the CLI clock: real time, or ``T`` (starts at T now) or ``T@E`` (T at Unix time E).

    ``T@E`` lets processes started at different moments share one simulated
    timeline: each computes ``T + (real_now - E)``.
    """
    if not spec:
        return SystemClock()
    instant_text, sep, epoch_text = spec.partition("@")
    instant = inputs.instant(instant_text)
    if sep:
        try:
            anchor = datetime.fromtimestamp(float(epoch_text), UTC)
        except (ValueError, OverflowError) as exc:
            raise errors.InvalidInput(f"--now '{spec}': '{epoch_text}' is not a Unix time") from exc
    else:
        anchor = datetime.now(UTC)
    return SystemClock(offset=instant - anchor)


def format_instant(instant: datetime | None) -> str | None:
    """ISO 8601 in UTC at second precision ending in ``Z`` (the only form printed or put in JSON).

    Sub-second digits are dropped (truncated): durations that need them are
    reported as numbers of seconds (``duration_s``, ``start_delay_s``).
    """
    if instant is None:
        return None
    return to_utc(instant).replace(microsecond=0).isoformat().replace("+00:00", "Z")
