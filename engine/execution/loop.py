"""The run loop: the one place that claims, backs off after a database error, waits and stops.

The pool (``execution.pool``) builds every loop: ``work`` and ``cycle`` (one thread or
several) and each thread behind ``serve`` run ``RunLoop.run``; ``serve``'s own tick loop
backs off with ``Backoff``. The loop knows its worker only as callables (``claim_and_execute``,
``reclaim``, ``beat``), so it is tested with plain functions on a manual clock.
A loop in the foreground that runs until idle reports a database error (the command
exits 1); a long-running one outlives it: it counts the failure, waits
``policies.decide_loop_retry_delay`` on the engine's clock, takes back the runs its worker
id still holds (the error may have cut one short) and goes on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from engine.core import errors, logs, policies
from engine.core.run_end import RunOutcome
from engine.execution.group_commit import GroupCommitter
from engine.store.database import DATABASE_ERRORS

if TYPE_CHECKING:
    from engine.core.clock import Clock

log = logging.getLogger(__name__)


class Backoff:
    """Database errors in a row: each one logged with the wait before the next try."""

    def __init__(self, clock: Clock, poll: timedelta, event: str) -> None:
        self.clock = clock
        self.poll = poll
        self.event = event
        self.failures = 0

    def failed(self, exc: BaseException) -> float:
        """Count a database error and log it; the seconds to wait before trying again."""
        self.failures += 1
        delay = policies.decide_loop_retry_delay(self.failures, self.poll)
        logs.event(log, logging.WARNING, self.event, error=errors.first_line(exc), retry_in_s=delay)
        return delay

    def recovered(self) -> int:
        """The errors in a row before this success (0 when there were none), and start counting again."""
        failures, self.failures = self.failures, 0
        return failures


class Budget:
    """At most ``limit`` runs claimed across the loops that share it (None: no limit)."""

    def __init__(self, limit: int | None) -> None:
        self._left = limit
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Take one run from the budget; False when it is spent."""
        with self._lock:
            if self._left is None:
                return True
            if self._left <= 0:
                return False
            self._left -= 1
            return True

    def give_back(self) -> None:
        """Return a run taken for a claim that found nothing or failed."""
        with self._lock:
            if self._left is not None:
                self._left += 1


class RunLoop:
    """One thread's loop over ``claim_and_execute``.

    ``stops``: any of these set ends the loop (SIGTERM's event, a pool's "a thread died").
    ``doorbell``: the event an idle loop waits on, taken before it looks for work so a
    ring between finding nothing and waiting is not lost (default: the first stop).
    ``committer``: a shared group commit, told when this loop is idle.
    """

    def __init__(self, clock: Clock, poll: timedelta, *, stops: Sequence[threading.Event],
                 claim_and_execute: Callable[[], RunOutcome | None], reclaim: Callable[[], object],
                 beat: Callable[[], None] | None = None, doorbell: Callable[[], threading.Event] | None = None,
                 committer: GroupCommitter | None = None) -> None:
        self.clock = clock
        self.poll = poll
        self.stops = tuple(stops)
        self._claim_and_execute = claim_and_execute
        self._reclaim = reclaim
        self._beat = beat
        self._doorbell = doorbell or (lambda: self.stops[0])
        self._committer = committer

    def stopped(self) -> bool:
        """True once any of the loop's stop events is set."""
        return any(stop.is_set() for stop in self.stops)

    def run(self, *, until_idle: bool, budget: Budget | None = None,
            done: list[RunOutcome] | None = None) -> list[RunOutcome]:
        """Claim and execute until stopped, the budget is spent, or (``until_idle``) nothing is claimable.

        Outcomes are appended to ``done`` (shared by a pool's loops; list.append is atomic).
        """
        budget = budget or Budget(None)
        done = [] if done is None else done
        backoff = Backoff(self.clock, self.poll, "work_loop_failed")
        committer = self._committer
        if committer is not None:
            committer.busy()
        try:
            while not self.stopped():
                if not budget.take():
                    break
                bell = self._doorbell()
                try:
                    if backoff.failures:  # a database error may have cut a run short: take it back now
                        self._reclaim()
                    if self._beat is not None:
                        self._beat()
                    outcome = self._claim_and_execute()
                    backoff.recovered()  # the waits grow until a claim gets through
                except DATABASE_ERRORS as exc:
                    budget.give_back()
                    if until_idle:  # a one-shot pass reports the failure (exit 1)
                        raise
                    self.clock.sleep(backoff.failed(exc), self.stops[0])
                    continue
                if outcome is not None:
                    done.append(outcome)
                    continue
                budget.give_back()
                if until_idle:
                    break
                self._wait(bell)
        finally:
            if committer is not None:
                committer.idle()
        return done

    def _wait(self, bell: threading.Event) -> None:
        """Nothing claimable: wait the poll interval, or until the doorbell rings or the loop stops."""
        committer = self._committer
        if committer is not None:
            committer.idle()
        try:
            self.clock.wait(self.poll.total_seconds(), bell)
        finally:
            if committer is not None:
                committer.busy()
