"""The shell of shared pacing: reserve a slot in the store, then sleep until it through the clock.

The rule is ``core.pacing.decide_slot``; the reservation ``store.rate_limits``.
"""

from __future__ import annotations

from datetime import timedelta

from engine.core.clock import Clock
from engine.store.handle import Store


def wait_for_slot(store: Store, clock: Clock, name: str, interval: timedelta) -> None:
    """Reserve a slot of limit ``name`` (one write transaction) and sleep until it.

    Slots of one limit are at least ``interval`` apart across every process
    sharing ``store``; the sleep happens after the commit, holding nothing.
    """
    slot_at = store.reserve_rate_slot(name, interval, clock.now())
    wait_s = (slot_at - clock.now()).total_seconds()
    if wait_s > 0:
        clock.sleep(wait_s)
