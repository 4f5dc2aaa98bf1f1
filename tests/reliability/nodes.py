"""Long-running ``reportflow`` nodes under a supervisor, and an outside witness of step executions.

``Node`` keeps one ``serve`` or ``work`` process running the way systemd's
``Restart=always`` would: when the process exits, its exit code and last log
line are recorded, and after ``restart_after`` seconds it is started again
with the same arguments (and the same ``--worker-id``, so it takes its own
interrupted runs back at once).

``SuccessWatch`` polls the database from the test's own connection and notes,
for every step it sees SUCCESS, how long the ``four_steps`` side-effect log was
*after* that read: a ``start`` line for that step past that offset is a SUCCESS
step executed again (SPEC §10.3), whatever the engine's records say.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.acceptance import procs


@dataclass
class Exit:
    code: int
    last_line: str
    at: float
    served: bool = False  # it had logged serve_started (a serve past its start-up)


@dataclass
class Node:
    """One supervised process: ``args`` are the CLI arguments after ``--now``."""

    name: str
    tmp: Path
    config: Path
    now: str
    args: tuple[str, ...]
    restart_after: float = 1.0
    exits: list[Exit] = field(default_factory=list)
    proc: subprocess.Popen[str] | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _incarnation: int = 0
    _recorded: set[int] = field(default_factory=set)
    _killed: int = 0  # the incarnation the test last SIGKILLed
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Node:
        self._spawn()
        self._thread = threading.Thread(target=self._supervise, name=f"supervise-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _spawn(self) -> None:
        self._incarnation += 1
        (self.tmp / "logs").mkdir(exist_ok=True)
        self.proc = procs.spawn(self.tmp, self.config, *self.args, now=self.now,
                                log_name=f"logs/{self.name}-{self._incarnation}.log")

    def _record_exit(self) -> None:
        """Note the current incarnation's exit, once (the supervisor and ``terminate`` may both see it)."""
        with self._lock:
            if self._incarnation in self._recorded:
                return
            self._recorded.add(self._incarnation)
            assert self.proc is not None
            path = Path(self.proc.log_path)  # type: ignore[attr-defined]
            self.exits.append(Exit(self.proc.returncode, last_line(path), time.monotonic(),
                                   "serve_started" in path.read_text()))

    def _supervise(self) -> None:
        while True:
            assert self.proc is not None
            self.proc.wait()
            if self._stopping.is_set():
                return
            self._record_exit()
            if self._stopping.wait(self.restart_after):
                return
            self._spawn()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, timeout: float = 120) -> int | None:
        """SIGTERM (the step finishes, the run is handed back); returns the exit code.

        None when no incarnation was running (it had exited, e.g. killed by the
        test, and the supervisor had not restarted it yet): that exit is recorded
        in ``exits`` like any other, for the caller to judge.
        """
        self._stopping.set()
        assert self.proc is not None
        if self._killed == self._incarnation:  # our SIGKILL may not have landed yet: let it
            self.proc.wait(timeout=30)
        if self.proc.poll() is not None:
            self._record_exit()
            if self._thread is not None:
                self._thread.join(timeout=10)
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate(timeout=30)
            raise AssertionError(f"{self.name} did not stop within {timeout}s of SIGTERM") from None
        if self._thread is not None:
            self._thread.join(timeout=10)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the current incarnation; the supervisor starts the next one."""
        if self.proc is not None and self.proc.poll() is None:
            self._killed = self._incarnation
            os.kill(self.proc.pid, signal.SIGKILL)

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted((self.tmp / "logs").glob(f"{self.name}-*.log")))


def last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


class SuccessWatch:
    """Polls step statuses (own engine, short connect timeout) and remembers the log offset after each first SUCCESS."""

    def __init__(self, url: str, log: Path, interval: float = 0.25) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        args = {"connect_timeout": 2} if url.startswith("postgresql") else {"timeout": 30}
        self.engine = create_engine(url, poolclass=NullPool, connect_args=args)
        self.log = log
        self.interval = interval
        self.first_success: dict[tuple[int, str], int] = {}
        self.reads = 0
        self.failed_reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="success-watch", daemon=True)

    def start(self) -> SuccessWatch:
        self._thread.start()
        return self

    def read_once(self) -> None:
        from sqlalchemy import select

        from engine.store.tables import runs, steps

        query = (select(steps.c.run_id, steps.c.name).join(runs, runs.c.id == steps.c.run_id)
                 .where(steps.c.status == "SUCCESS", runs.c.workflow == "four_steps"))
        with self.engine.connect() as conn:
            done = conn.execute(query).all()
        size = self.log.stat().st_size if self.log.exists() else 0  # read after the query: sound, never early
        for run_id, name in done:
            self.first_success.setdefault((int(run_id), name), size)
        self.reads += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.read_once()
            except Exception:  # noqa: BLE001 - the database is down or a backend was killed: next time
                self.failed_reads += 1

    def halt(self) -> None:
        """Stop polling (``read_once`` still works: a last read after the final drain)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def violations(self) -> list[str]:
        """``start`` lines of steps the database already showed SUCCESS (SPEC §10.3 broken)."""
        text = self.log.read_bytes() if self.log.exists() else b""
        found, offset = [], 0
        for raw in text.splitlines(keepends=True):
            parts = raw.decode().split()
            if parts and parts[0] == "start":
                key = (int(parts[1]), parts[2])
                seen = self.first_success.get(key)
                if seen is not None and offset >= seen:
                    found.append(f"run {key[0]} step {key[1]} started again by pid {parts[3]} (attempt {parts[4]}) "
                                 "after the database showed it SUCCESS")
            offset += len(raw)
        return found


def step_executions(log: Path) -> tuple[Counter[tuple[int, str]], Counter[tuple[int, str]]]:
    """(starts, ends) per (run, step) in the ``four_steps`` side-effect log."""
    starts: Counter[tuple[int, str]] = Counter()
    ends: Counter[tuple[int, str]] = Counter()
    if log.exists():
        for line in log.read_text().splitlines():
            parts = line.split()
            if parts and parts[0] in ("start", "end"):
                (starts if parts[0] == "start" else ends)[(int(parts[1]), parts[2])] += 1
    return starts, ends


def utc(value: datetime) -> datetime:
    """A database instant as aware UTC (SQLite hands back naive values)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def slots_seen(rows: Sequence[Any], too_old: Sequence[Any], context: str
               ) -> tuple[dict[int, list[tuple[datetime, datetime]]], dict[int, set[datetime]]]:
    """SPEC §10.1 from the outside (one revision-1 row per slot and trigger), then, per schedule,
    the ``too_old`` ranges of the audit and the slots that have a row, for the §10.2 check."""
    per_slot = Counter((r.schedule_id, utc(r.scheduled_for), r.trigger_type) for r in rows if r.revision == 1)
    doubles = [k for k, n in per_slot.items() if n > 1]
    assert not doubles, f"{context}: slots with more than one row: {doubles[:5]}"
    ranges: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    for schedule_id, after in too_old:
        ranges[schedule_id].append((datetime.fromisoformat(after["from"]), datetime.fromisoformat(after["to"])))
    have: dict[int, set[datetime]] = defaultdict(set)
    for r in rows:
        have[r.schedule_id].add(utc(r.scheduled_for))
    return ranges, have
