"""The run loop on a manual clock: back-off after database errors, reclaim, budget, stop (no database)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import OperationalError

from engine.core import policies
from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.core.run_end import RunOutcome
from engine.execution import loop

START = datetime(2026, 9, 29, 10, 0, tzinfo=UTC)
POLL = timedelta(seconds=1)


def _done(*keys: str) -> list[RunOutcome]:
    """Outcomes of runs that succeeded, one per key."""
    return [RunOutcome(run_id=n, key=key, status=RunStatus.SUCCESS) for n, key in enumerate(keys, 1)]


def _outage(failures: int, stop: threading.Event, after: list[RunOutcome]) -> Callable[[], RunOutcome | None]:
    """claim_and_execute: ``failures`` database errors, then the items of ``after``, then stop."""
    calls = {"n": 0}

    def claim_and_execute() -> RunOutcome | None:
        calls["n"] += 1
        if calls["n"] <= failures:
            raise OperationalError("SELECT 1", {}, Exception("server closed the connection"))
        if after:
            return after.pop(0)
        stop.set()
        return None
    return claim_and_execute


def test_manual_sleep_advances_and_wait_blocks_until_stopped() -> None:
    clock = ManualClock(START)
    stop = threading.Event()
    assert clock.sleep(5, stop) is False
    assert clock.now() == START + timedelta(seconds=5)
    stop.set()
    assert clock.sleep(5, stop) is True and clock.now() == START + timedelta(seconds=5)
    assert clock.wait(5, stop) is True and clock.now() == START + timedelta(seconds=5)


def test_a_long_running_loop_backs_off_on_the_clock_then_takes_its_runs_back() -> None:
    clock = ManualClock(START)
    stop = threading.Event()
    reclaimed: list[datetime] = []
    first = _done("run 1")
    runs = loop.RunLoop(clock, POLL, stops=[stop], claim_and_execute=_outage(3, stop, list(first)),
                        reclaim=lambda: reclaimed.append(clock.now()))
    done = runs.run(until_idle=False)
    waited = sum(policies.decide_loop_retry_delay(n, POLL) for n in (1, 2, 3))
    assert done == first
    assert clock.now() == START + timedelta(seconds=waited)  # doubling waits, not a hang, not a spin
    assert len(reclaimed) == 3 and reclaimed[-1] == clock.now()  # before each claim after an error


def test_a_loop_until_idle_reports_the_database_error() -> None:
    stop = threading.Event()
    runs = loop.RunLoop(ManualClock(START), POLL, stops=[stop], claim_and_execute=_outage(1, stop, []),
                        reclaim=lambda: None)
    with pytest.raises(OperationalError):
        runs.run(until_idle=True)


def test_the_budget_is_shared_and_any_stop_ends_the_loop() -> None:
    stop, halt = threading.Event(), threading.Event()
    a, b, c = _done("a", "b", "c")
    outcomes = [a, b, c]
    runs = loop.RunLoop(ManualClock(START), POLL, stops=[stop, halt], claim_and_execute=lambda: outcomes.pop(0),
                        reclaim=lambda: None)
    budget = loop.Budget(2)
    assert runs.run(until_idle=True, budget=budget) == [a, b]
    assert runs.run(until_idle=True, budget=budget) == []
    halt.set()
    assert runs.run(until_idle=True) == []
