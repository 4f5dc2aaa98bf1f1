"""Pacing requests to an outside service across every worker on the store.

A limit such as Notion's 3 requests/s belongs to an integration, not to a
process: N workers each pacing themselves would send 3N requests/s. So a
request first reserves a slot in the store (``store.rate_limits``, one short
transaction), then sleeps until that slot through the clock, outside any
transaction. ``decide_slot`` is the pure rule; ``execution.step_call.wait_for_slot`` the shell.
``LocalLimits`` applies the same rule to slots held in one process's memory,
for a caller with no store at hand (``doctor``'s Notion probes).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.core.clock import Clock

#: A stored next slot further ahead than this is taken for a clock that jumped
#: (a process run with ``--now`` in the future, a skewed node), not for a queue:
#: the limit restarts from ``now`` rather than making every caller sleep for it.
MAX_AHEAD = timedelta(minutes=5)


@dataclass(frozen=True)
class SlotDecision:
    slot_at: datetime  # when the caller may send its request
    next_at: datetime  # the next caller's earliest slot


def decide_slot(next_at: datetime, now: datetime, interval: timedelta) -> SlotDecision:
    """The slot for a request arriving at ``now`` when the limit's next free slot is ``next_at``.

    No burst: slots are exactly ``interval`` apart while requests queue, and a
    request after a quiet spell goes at once. A ``next_at`` more than
    ``MAX_AHEAD`` ahead of ``now`` is ignored (see ``MAX_AHEAD``).
    """
    if interval <= timedelta(0):
        raise ValueError("a rate limit interval must be positive")
    slot_at = now if next_at <= now or next_at - now > MAX_AHEAD else next_at
    return SlotDecision(slot_at=slot_at, next_at=slot_at + interval)


class LocalLimits:
    """Rate limits held in this process's memory, paced by ``decide_slot`` like the shared ones.

    Thread-safe; ``pace(name, interval)`` has the signature of a step's
    ``ctx.pace`` and sleeps through ``clock``, holding no lock while it sleeps.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._next: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def pace(self, name: str, interval: timedelta) -> None:
        """Wait for the next slot of limit ``name``: slots ``interval`` apart while callers queue."""
        with self._lock:
            now = self._clock.now()
            decision = decide_slot(self._next.get(name, now), now, interval)
            self._next[name] = decision.next_at
        wait_s = (decision.slot_at - self._clock.now()).total_seconds()
        if wait_s > 0:
            self._clock.sleep(wait_s)
