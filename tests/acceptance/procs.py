"""Real ``reportflow`` processes for acceptance and reliability tests."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from tests.flows.install import pythonpath
from tests.support import REPO_ROOT


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The standard output of a command that must have succeeded; its exit status and output otherwise."""
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr[-4000:]}"
    return result.stdout


class Shared:
    """A shared simulated clock for processes started at different moments: ``--now T@E``."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.anchor = time.time()  # the real instant at which the simulated clock read `start`

    def at(self, offset_s: float = 0.0) -> str:
        """``--now`` for a process whose clock reads ``start + offset + (real elapsed)``."""
        instant = datetime.fromtimestamp(self.start.timestamp() + offset_s, UTC)
        return f"{instant.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}@{self.anchor}"


def env_for(tmp: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": pythonpath(tmp), **(extra or {})}
    env.pop("REPORTFLOW_NOW", None)
    return env


def command(config: Path, now: str | None, *args: str) -> list[str]:
    cmd = [sys.executable, "-m", "engine.cli", "--config", str(config)]
    if now:
        cmd += ["--now", now]
    return cmd + list(args)


def run(tmp: Path, config: Path, *args: str, now: str | None = None, timeout: float = 180,
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(config, now, *args), capture_output=True, text=True, env=env_for(tmp, env),
                          cwd=REPO_ROOT, timeout=timeout)


_spawned = itertools.count()


def spawn(tmp: Path, config: Path, *args: str, now: str | None = None,
          env: Mapping[str, str] | None = None, log_name: str | None = None) -> subprocess.Popen[str]:
    """Start the CLI; its logs (stderr) go to a file, never a pipe nobody drains while it runs
    (a full pipe would block the process mid-transaction). ``finish`` reads them back."""
    log_path = tmp / (log_name or f"proc-{next(_spawned)}-{args[0]}.log")
    with open(log_path, "w") as stderr:  # the child writes to its own copy of the descriptor
        proc = subprocess.Popen(command(config, now, *args), stdout=subprocess.PIPE, stderr=stderr, text=True,
                                env=env_for(tmp, env), cwd=REPO_ROOT)
    proc.log_path = log_path  # type: ignore[attr-defined]
    return proc


def finish(proc: subprocess.Popen[str], timeout: float = 600) -> tuple[str, str]:
    """Wait for a spawned process; return its stdout and its log (stderr)."""
    out, _ = proc.communicate(timeout=timeout)
    return out or "", Path(proc.log_path).read_text()  # type: ignore[attr-defined]


def wait_for(predicate: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
    """Poll an observable condition (a log line, a row), failing after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def reap(proc: subprocess.Popen[str], timeout: float = 60) -> int:
    """Wait for a spawned process to exit; its exit status. Its output is read to the end, which closes the
    pipe (``wait`` alone leaves it open)."""
    proc.communicate(timeout=timeout)
    return proc.returncode


def kill9(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the process and reap it."""
    proc.send_signal(signal.SIGKILL)
    reap(proc, 30)
