"""Write transactions for the worker: a pinned connection, or group commit across threads.

``PinnedWriter`` keeps one connection checked out for one worker thread (no
pool checkout, reset and return per transaction). ``GroupCommitter`` is shared
by the threads of a ``WorkerPool`` (SPEC §4, ``[worker] group_commit``): the
first boundary to arrive opens one transaction (``BEGIN IMMEDIATE`` on
SQLite) and leads it; boundaries that arrive while it is open join it, each
inside its own ``SAVEPOINT``. A boundary that raises (its fencing guard
failed: ``LeaseLost``) is rolled back to its savepoint and leaves the batch
alone; the others stay. The leader commits once every busy thread has joined or
the window has passed, whichever is first, and every member's ``write()``
returns only after that COMMIT: no caller learns its boundary is done, and no
next step starts, before it is durable. A failed COMMIT raises in every member.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from sqlalchemy.engine import Connection, Engine, RootTransaction

from engine.core import clock
from engine.store import database, fastsql

_SAVEPOINT = "SAVEPOINT rf_boundary"
_RELEASE = "RELEASE SAVEPOINT rf_boundary"
_UNDO = "ROLLBACK TO SAVEPOINT rf_boundary"


class Writer(Protocol):
    def write(self) -> AbstractContextManager[Connection]:
        """A write transaction, durable when the block exits without error."""

    def close(self) -> None:
        """Give the connection back."""


# A kept connection idle longer than this goes back to the pool before its next
# transaction, and the pool checks it out again with its pre-ping: a connection the
# server dropped while idle (a restart, pg_terminate_backend) is never reused. A busy
# connection never pays for the ping.
IDLE_RECHECK_S = 1.0


def _usable(conn: Connection | None, engine: Engine, idle_s: float,
            recheck_s: float = IDLE_RECHECK_S) -> Connection:
    """``conn`` if it may be used for the next transaction, else a fresh (pre-pinged) connection."""
    if conn is not None and not conn.closed and not conn.invalidated and idle_s < recheck_s:
        return conn
    if conn is not None:
        conn.close()
    return engine.connect()


class PinnedWriter:
    """Write transactions on one connection, taken on first use and kept until ``close``.

    One thread at a time (each worker thread has its own). A connection the
    database dropped is invalidated by SQLAlchemy and replaced on next use, and
    one left idle for ``IDLE_RECHECK_S`` is checked by the pool's pre-ping first.
    """

    def __init__(self, engine: Engine, *, idle_recheck_s: float = IDLE_RECHECK_S) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self._clock = clock.REAL  # idleness is real time, whatever clock the runtime simulates
        self._used_at = float("-inf")
        self._idle_recheck_s = idle_recheck_s

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction on this thread's own connection (checked first after a long idle)."""
        self._conn = _usable(self._conn, self._engine, self._clock.monotonic() - self._used_at,
                             self._idle_recheck_s)
        try:
            with database.write_turn(self._engine), self._conn.begin():
                yield self._conn
        finally:
            self._used_at = self._clock.monotonic()

    def close(self) -> None:
        """Give the connection back."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass
class _Batch:
    transaction: RootTransaction
    turn: ExitStack  # this process's write turn (``database.write_turn``), given back after the COMMIT
    members: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class GroupCommitError(database.CommitFailed):
    """The shared COMMIT of a batch failed: none of its boundaries is durable."""


class GroupCommitter:
    """One connection and one open batch shared by the threads of a process (see the module docstring).

    ``busy()`` / ``idle()`` tell it how many threads may still join a batch:
    the leader commits at once when all of them have, so a lone thread never
    waits for the window.
    """

    def __init__(self, engine: Engine, window: timedelta) -> None:
        self._engine = engine
        self._conn = engine.connect()
        self._used_at = float("-inf")
        self._cond = threading.Condition()
        self._batch: _Batch | None = None
        self._busy = 0
        self._clock = clock.REAL  # the window is real time, whatever clock the runtime simulates
        self.window_s = window.total_seconds()
        self.sizes: Counter[int] = Counter()  # committed batches by their number of members (benchmarks, tests)

    def busy(self) -> None:
        """A member thread is working: a batch may wait for its write."""
        with self._cond:
            self._busy += 1

    def idle(self) -> None:
        """A member thread waits for work: no batch waits for it."""
        with self._cond:
            self._busy -= 1
            self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction that joins the open batch (one commit for every member), or opens one."""
        with self._cond:
            batch = self._batch
            leader = batch is None
            if batch is None:
                self._conn = _usable(self._conn, self._engine, self._clock.monotonic() - self._used_at)
                turn = ExitStack()
                turn.enter_context(database.write_turn(self._engine))
                try:
                    batch = self._batch = _Batch(self._conn.begin(), turn)
                except BaseException:
                    turn.close()
                    raise
            batch.members += 1
            fastsql.execute_text(self._conn, _SAVEPOINT)
            try:
                yield self._conn
            except BaseException:
                try:
                    fastsql.execute_text(self._conn, _UNDO)
                    fastsql.execute_text(self._conn, _RELEASE)
                finally:
                    if leader:
                        self._lead(batch)
                    else:
                        self._cond.notify_all()  # the leader counts this member as arrived
                raise
            fastsql.execute_text(self._conn, _RELEASE)
            if leader:
                self._lead(batch)
            else:
                self._cond.notify_all()
        batch.done.wait()
        if batch.error is not None:
            raise GroupCommitError(f"group commit failed: {batch.error}") from batch.error

    def _lead(self, batch: _Batch) -> None:
        """Wait (lock released) for the busy threads or the window, then COMMIT and wake the members."""
        deadline = self._clock.monotonic() + self.window_s
        while batch.members < self._busy:
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                break
            self._cond.wait(remaining)
        self._batch = None
        self._used_at = self._clock.monotonic()
        try:
            batch.transaction.commit()
            self.sizes[batch.members] += 1
        except BaseException as exc:
            batch.error = exc
            if batch.transaction.is_active:
                batch.transaction.rollback()
        finally:
            batch.turn.close()
            batch.done.set()

    def close(self) -> None:
        """Give the shared connection back."""
        with self._cond:
            self._conn.close()
