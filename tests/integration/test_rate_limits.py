"""The shared rate limit in the store: slots of one name are an interval apart, for every caller."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from engine.core import pacing
from engine.core.clock import ManualClock
from engine.execution import step_call
from engine.store.handle import Store
from tests.support import utc

T0 = utc(2026, 9, 30, 1, 0)
STEP = timedelta(milliseconds=350)


def test_slots_queue_an_interval_apart_and_restart_after_a_quiet_spell(store_url: str) -> None:
    store = Store.open(store_url, auto_migrate=True)
    try:
        slots = [store.reserve_rate_slot("notion:a", STEP, T0) for _ in range(3)]
        assert slots == [T0, T0 + STEP, T0 + 2 * STEP]
        assert store.reserve_rate_slot("notion:b", STEP, T0) == T0  # another integration, its own limit
        later = T0 + timedelta(seconds=10)
        assert store.reserve_rate_slot("notion:a", STEP, later) == later
    finally:
        store.dispose()


def test_concurrent_reservations_never_share_a_slot(store_url: str) -> None:
    stores = [Store.open(store_url, auto_migrate=True) for _ in range(4)]
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            slots = list(pool.map(lambda i: stores[i % 4].reserve_rate_slot("notion:a", STEP, T0), range(20)))
        assert sorted(slots) == [T0 + k * STEP for k in range(20)]
    finally:
        for store in stores:
            store.dispose()


def test_wait_for_slot_sleeps_until_the_reserved_slot(store_url: str) -> None:
    store = Store.open(store_url, auto_migrate=True)
    clock = ManualClock(T0)
    try:
        for _ in range(3):
            step_call.wait_for_slot(store, clock, "notion:a", STEP)
        assert clock.now() == T0 + 2 * STEP  # the third request waited for two slots
    finally:
        store.dispose()


def test_a_slot_far_ahead_is_a_clock_jump_not_a_queue() -> None:
    ahead = T0 + pacing.MAX_AHEAD + timedelta(seconds=1)
    assert pacing.decide_slot(ahead, T0, STEP).slot_at == T0
    near = T0 + timedelta(seconds=2)
    assert pacing.decide_slot(near, T0, STEP) == pacing.SlotDecision(near, near + STEP)
