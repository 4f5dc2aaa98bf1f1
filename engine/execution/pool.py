"""The workers of a process and the loops that drive them: one ``Worker`` and one ``RunLoop`` per run slot.

Every loop that claims runs is built here: ``work`` runs them in the foreground (on the
calling thread when ``concurrency`` is 1, so ``work --until-idle`` stays one thread),
``start`` behind ``serve``.

Every limit stays where it was: claims are serialised in the database
(``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL), so one
RUNNING run per base key and ``backfill_concurrency`` hold across the threads
exactly as across processes; ``Store.exclusive`` keeps one Ollama generation
per host (a thread lock inside the process, the file or advisory lock across
processes); every write is still fenced by its run's token, and every run has
its own heartbeat. With ``concurrency > 1`` and ``group_commit`` above zero the
threads share a ``GroupCommitter``. ``stop`` (SIGTERM) is shared: each thread
hands its run back at its next step boundary, then the pool returns.

``serve`` runs the pool in the background (``start``): its threads keep claiming
while the serve loop ticks, and ``wake`` rouses the idle ones as soon as a tick
has committed runs, instead of at their next poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta

from engine.core import logs
from engine.core.run_end import RunOutcome
from engine.execution import loop, reconciler
from engine.execution.group_commit import GroupCommitter
from engine.execution.worker import Worker, default_worker_id
from engine.runtime import Runtime

log = logging.getLogger(__name__)


class _Doorbell:
    """Wakes every idle thread at once: a waiter takes the current event, ``ring`` sets it and
    puts a fresh one in its place. A thread takes the event before it looks for work, so a
    ring between finding nothing and going to sleep is not lost."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()

    def current(self) -> threading.Event:
        with self._lock:
            return self._event

    def ring(self) -> None:
        with self._lock:
            rung, self._event = self._event, threading.Event()
        rung.set()


class _ClaimGate:
    """Lets ``held_runs`` be exact while runs are taken back: no claim is between its commit and
    its thread's ``held_run`` while the gate is paused."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._claiming = 0
        self._paused = 0

    @contextmanager
    def claiming(self) -> Iterator[None]:
        with self._cond:
            while self._paused:
                self._cond.wait()
            self._claiming += 1
        try:
            yield
        finally:
            with self._cond:
                self._claiming -= 1
                self._cond.notify_all()

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self._cond:
            self._paused += 1
            while self._claiming:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._paused -= 1
                self._cond.notify_all()


class WorkerPool:
    """``concurrency`` workers sharing one worker id, one stop event and (optionally) one group commit."""

    def __init__(self, rt: Runtime, worker_id: str | None = None, *, stop: threading.Event | None = None,
                 concurrency: int | None = None) -> None:
        self.rt = rt
        self.stop = stop or threading.Event()
        self.worker_id = worker_id or default_worker_id()
        self.concurrency = concurrency or rt.config.worker.concurrency
        window = rt.config.worker.group_commit
        self.committer = (GroupCommitter(rt.store.engine, window)
                          if self.concurrency > 1 and window > timedelta(0) else None)
        self.workers = [Worker(rt, self.worker_id, stop=self.stop, writer=self.committer)
                        for _ in range(self.concurrency)]
        self._threads = (ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="run")
                         if self.concurrency > 1 else None)
        self._gate = _ClaimGate()
        self._bell = _Doorbell()
        self._background: list[Future[None]] = []

    def work(self, *, until_idle: bool = False, max_runs: int | None = None) -> list[RunOutcome]:
        """Claim and execute runs, ``concurrency`` at a time, until stopped, idle (``until_idle``) or ``max_runs`` are done.

        First takes back the runs this worker id still holds (a restarted worker
        resumes its own interrupted runs at once, without waiting for the lease).
        """
        self.reclaim()
        budget = loop.Budget(max_runs)
        if self._threads is None:  # one worker: its loop runs on this thread
            return self._foreground_loop(self.workers[0], threading.Event()).run(until_idle=until_idle, budget=budget)
        return self._run(until_idle=until_idle, budget=budget)

    def start(self) -> None:
        """Claim and execute runs in the background, ``concurrency`` threads, until ``stop`` or ``close`` (``serve``).

        An idle thread looks again after the poll interval, or at once on ``wake``. A thread
        outlives database errors (it takes its runs back and retries with a backoff); a thread
        that fails otherwise stops the others from claiming, and ``check`` raises its error.
        Does nothing when started already.
        """
        if self._background:
            return
        if self._threads is None:
            self._threads = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="run")
        halt = threading.Event()
        self._background = [self._threads.submit(self._guarded, self._background_loop(worker, halt), halt)
                            for worker in self.workers]

    def wake(self) -> None:
        """Rouse the idle background threads now: runs have just become claimable."""
        self._bell.ring()

    def check(self) -> None:
        """Raise the error a background thread died of, if one did."""
        for future in self._background:
            if future.done() and (exc := future.exception()) is not None:
                raise exc

    def reclaim(self) -> list[int]:
        """Take back the runs this worker id still holds that no thread of this pool is executing."""
        with self._gate.paused():
            return reconciler.reclaim_own(self.rt, self.worker_id, still_held=self.held_runs())

    def beat(self) -> None:
        """Say the pool's worker id is alive (``Worker.beat``), from whichever thread calls it."""
        if self._background:  # workers[0]'s writer belongs to its thread: beat in a transaction of our own
            self.workers[0].beat(write=self.rt.store.write)
        else:
            self.workers[0].beat()

    def held_runs(self) -> set[int]:
        """Runs the pool's threads have claimed and are executing right now."""
        return {worker.held_run for worker in self.workers if worker.held_run is not None}

    def _run(self, *, until_idle: bool, budget: loop.Budget) -> list[RunOutcome]:
        """The foreground mode: every thread runs its loop until stopped, idle or the budget is spent."""
        assert self._threads is not None
        done: list[RunOutcome] = []
        halt = threading.Event()  # a thread died: the others finish their runs and stop claiming
        futures: list[Future[None]] = [
            self._threads.submit(self._guarded, self._foreground_loop(worker, halt, beat=i == 0), halt,
                                 until_idle=until_idle, budget=budget, done=done)
            for i, worker in enumerate(self.workers)]
        errors = [exc for f in futures if (exc := f.exception()) is not None]
        if errors:
            raise errors[0]
        return done

    def _foreground_loop(self, worker: Worker, halt: threading.Event, *, beat: bool = True) -> loop.RunLoop:
        """A thread of ``work``: it waits on ``stop`` when idle; one thread beats for the pool."""
        return loop.RunLoop(self.rt.clock, self.rt.config.worker.poll_interval, stops=[self.stop, halt],
                            claim_and_execute=lambda: self._run_one(worker), reclaim=self.reclaim,
                            beat=worker.beat if beat else None, committer=self.committer)

    def _background_loop(self, worker: Worker, halt: threading.Event) -> loop.RunLoop:
        """A thread behind ``serve``: it waits on the doorbell when idle; ``serve`` beats for the pool."""
        return loop.RunLoop(self.rt.clock, self.rt.config.worker.poll_interval, stops=[self.stop, halt],
                            claim_and_execute=lambda: self._run_one(worker), reclaim=self.reclaim,
                            doorbell=self._bell.current, committer=self.committer)

    def _run_one(self, worker: Worker) -> RunOutcome | None:
        with self._gate.claiming():
            claim = worker.claim()
        return None if claim is None else worker.execute(claim)

    def _guarded(self, runs: loop.RunLoop, halt: threading.Event, *, until_idle: bool = False,
                 budget: loop.Budget | None = None, done: list[RunOutcome] | None = None) -> None:
        """Run one thread's loop; a thread that dies of anything stops the others from claiming."""
        try:
            runs.run(until_idle=until_idle, budget=budget, done=done)
        except BaseException:
            halt.set()
            logs.event(log, logging.ERROR, "worker_thread_failed", exc_info=True, worker=self.worker_id)
            raise

    def close(self) -> None:
        """Wait for the threads and let go of the connections. Background threads are stopped first,
        as by SIGTERM: each hands its run back at its next step boundary."""
        if self._background:
            self.stop.set()
            self._bell.ring()
        if self._threads is not None:
            self._threads.shutdown(wait=True)
        for worker in self.workers:
            worker.close()
        if self.committer is not None:
            self.committer.close()
