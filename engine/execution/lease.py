"""A claimed run's lease as its worker holds it: the fence check, the heartbeat that renews it, the waits it cuts short.

The step thread checks the lease (``Lease.check``) right before each external effect and
waits through ``Lease.sleep``; the worker's one heartbeat thread (``Heartbeat``) renews the
lease of the run it holds every quarter of the lease. A lease found lost is remembered
(``Lease.lost``), so every later check, beat and wait of that run ends at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

from engine.core import errors, logs
from engine.core.clock import Clock
from engine.runtime import Runtime
from engine.store import claims, database
from engine.store.claims import Claim

log = logging.getLogger(__name__)


class Lease:
    """The claim as this process holds it: the heartbeat and the step thread share it."""

    def __init__(self, rt: Runtime, claim: Claim, lease: timedelta,
                 write: Callable[[], AbstractContextManager[Any]] | None = None) -> None:
        self.rt = rt
        self.write = write or rt.store.write
        self.run_id = claim.run.id
        self.fence = claim.fence
        self.lease = lease
        self.lost = threading.Event()
        self.stop = threading.Event()
        self.max_hold = 2 * timedelta(seconds=claim.run.max_runtime_s)
        self.started = rt.clock.monotonic()

    def check(self) -> None:
        """Raise LeaseLost unless this worker still holds the run under a live lease (read from the database)."""
        if self.lost.is_set():
            raise errors.LeaseLost(self.run_id, self.fence)
        with self.rt.store.read() as conn:
            claims.check_fence(conn, self.run_id, self.fence, self.rt.clock.now())

    def beat(self) -> bool:
        """Extend the lease once; False when this run needs no more beats (ended, lost, 2x max_runtime)."""
        clock = self.rt.clock
        if self.stop.is_set() or self.lost.is_set():
            return False
        if clock.monotonic() - self.started > self.max_hold.total_seconds():
            logs.event(log, logging.WARNING, "heartbeat_stopped", run=self.run_id, reason="max_runtime")
            return False
        try:
            with self.write() as conn:
                claims.hold_run(conn, self.run_id, self.fence, lease_until=clock.now() + self.lease)
        except errors.LeaseLost:
            if not self.stop.is_set():  # not merely the run ending between the check and the write
                logs.event(log, logging.WARNING, "lease_lost", run=self.run_id, token=self.fence)
            self.lost.set()
            return False
        except database.DATABASE_ERRORS:  # a transient database error: the next beat tries again
            logs.event(log, logging.ERROR, "heartbeat_failed", exc_info=True, run=self.run_id)
        except Exception:  # a bug, not an outage: said once; the lease runs out and the reconciler takes the run
            logs.event(log, logging.ERROR, "heartbeat_crashed", exc_info=True, run=self.run_id)
            return False
        return True

    def sleep(self, seconds: float, stop: threading.Event) -> None:
        """``ctx.sleep``: wait on the engine's clock; ``stop`` (SIGTERM) ends it at once (``Interrupted``), a lost
        lease within a quarter of the lease (``LeaseLost``), so neither waits out a retry budget."""
        left = max(0.0, seconds)
        while True:
            if self.lost.is_set():
                raise errors.LeaseLost(self.run_id, self.fence)
            if stop.is_set():
                raise errors.Interrupted(f"run {self.run_id}: stopping while a step waited")
            if left <= 0:
                return
            part = min(left, self.lease.total_seconds() / 4)
            self.rt.clock.sleep(part, stop)
            left -= part


class Heartbeat:
    """A worker's heartbeat thread: every quarter of the lease, it extends the lease of the run held, if any.

    One thread for the worker's life, not one per run: starting a thread costs about as
    much as a step boundary, and a lease is still renewed at least every quarter of it
    while its run is held (the first beat may come sooner). Started by the first ``hold``.
    """

    def __init__(self, clock: Clock, lease: timedelta) -> None:
        self._clock = clock
        self._every_s = lease.total_seconds() / 4
        self._held: Lease | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    def hold(self, lease: Lease) -> None:
        """Renew ``lease`` from now on, until ``drop``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._beats, name="heartbeat", daemon=True)
            self._thread.start()
        self._held = lease

    def drop(self) -> None:
        """The held run has ended: renew nothing (its lease is told to stop beating)."""
        if self._held is not None:
            self._held.stop.set()
        self._held = None

    def close(self) -> None:
        """End the thread at its next wake."""
        self._closed.set()

    def _beats(self) -> None:
        finished: Lease | None = None
        while not self._clock.wait(self._every_s, self._closed):
            lease = self._held
            if lease is not None and lease is not finished and not lease.beat():
                finished = lease
