"""Several runs in flight in one process: one thread and one ``Worker`` per run slot.

Every limit stays where it was: claims are serialised in the database
(``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL), so one
RUNNING run per base key and ``backfill_concurrency`` hold across the threads
exactly as across processes; ``Store.exclusive`` keeps one Ollama generation
per host (a thread lock inside the process, the file or advisory lock across
processes); every write is still fenced by its run's token, and every run has
its own heartbeat. With ``concurrency > 1`` and ``group_commit`` above zero the
threads share a ``GroupCommitter``. ``stop`` (SIGTERM) is shared: each thread
hands its run back at its next step boundary, then the pool returns.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta

from sqlalchemy.exc import SQLAlchemyError

from engine import errors, logs, policies, reconciler
from engine.group_commit import GroupCommitError, GroupCommitter
from engine.runtime import Runtime
from engine.worker import RunOutcome, Worker, default_worker_id

log = logging.getLogger(__name__)


class _Budget:
    """At most ``limit`` runs claimed across the threads (None: no limit)."""

    def __init__(self, limit: int | None) -> None:
        self._left = limit
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._left is None:
                return True
            if self._left <= 0:
                return False
            self._left -= 1
            return True

    def give_back(self) -> None:
        with self._lock:
            if self._left is not None:
                self._left += 1


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

    def work(self, *, until_idle: bool = False, max_runs: int | None = None) -> list[RunOutcome]:
        """``Worker.work`` with ``concurrency`` runs at a time: until stopped, idle or ``max_runs`` are done."""
        if self._threads is None:
            return self.workers[0].work(until_idle=until_idle, max_runs=max_runs, stop=self.stop)
        reconciler.reclaim_own(self.rt, self.worker_id)
        return self._run(until_idle=until_idle, budget=_Budget(max_runs), beat=True)

    def drain(self) -> list[RunOutcome]:
        """Execute claimable runs until none is left now (``serve``'s loop; the caller reclaims and beats)."""
        if self._threads is None:
            done = []
            while not self.stop.is_set() and (outcome := self.workers[0].run_one()) is not None:
                done.append(outcome)
            return done
        return self._run(until_idle=True, budget=_Budget(None), beat=False)

    def beat(self) -> None:
        self.workers[0].beat()

    def held_runs(self) -> set[int]:
        """Runs the pool's threads are executing right now."""
        return {worker.held_run for worker in self.workers if worker.held_run is not None}

    def _run(self, *, until_idle: bool, budget: _Budget, beat: bool) -> list[RunOutcome]:
        assert self._threads is not None
        done: list[RunOutcome] = []
        halt = threading.Event()  # a thread died: the others finish their runs and stop claiming
        futures: list[Future[None]] = [
            self._threads.submit(self._loop, worker, until_idle, budget, done, halt, beat and i == 0)
            for i, worker in enumerate(self.workers)]
        errors = [exc for f in futures if (exc := f.exception()) is not None]
        if errors:
            raise errors[0]
        return done

    def _loop(self, worker: Worker, until_idle: bool, budget: _Budget, done: list[RunOutcome],
              halt: threading.Event, beat: bool) -> None:
        committer = self.committer
        if committer is not None:
            committer.busy()
        try:
            failures = 0
            while not (self.stop.is_set() or halt.is_set()):
                if not budget.take():
                    return
                try:
                    if failures:  # a database error may have cut this thread's run short: take it back
                        reconciler.reclaim_own(self.rt, self.worker_id, still_held=self.held_runs())
                        failures = 0
                    if beat:
                        worker.beat()
                    outcome = worker.run_one()
                except (SQLAlchemyError, GroupCommitError) as exc:
                    budget.give_back()
                    if until_idle:
                        raise
                    failures += 1  # a long-running pool outlives a dropped connection, as serve does
                    delay = policies.decide_retry_delay(failures, self.rt.config.worker.poll_interval)
                    logs.event(log, logging.WARNING, "work_loop_failed", error=errors.first_line(exc),
                               retry_in_s=delay)
                    self.rt.clock.sleep(delay, self.stop)
                    continue
                if outcome is not None:
                    done.append(outcome)  # list.append is atomic
                    continue
                budget.give_back()
                if until_idle:
                    return
                if committer is not None:
                    committer.idle()
                try:
                    self.rt.clock.sleep(self.rt.config.worker.poll_interval.total_seconds(), self.stop)
                finally:
                    if committer is not None:
                        committer.busy()
        except BaseException:
            halt.set()
            logs.event(log, logging.ERROR, "worker_thread_failed", exc_info=True, worker=self.worker_id)
            raise
        finally:
            if committer is not None:
                committer.idle()

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True)
        for worker in self.workers:
            worker.close()
        if self.committer is not None:
            self.committer.close()
