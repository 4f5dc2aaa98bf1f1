"""Shared pieces of the reliability suite: a report setup, side-effect witnesses, quiescence.

The witnesses count what the outside world saw (git invocations through a
wrapper on ``GIT_PYTHON_GIT_EXECUTABLE``, requests the fakes received, files
on disk), never the engine's own records, so a step executed twice shows even
when the engine believes it ran once.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.fakes.gitrepo import GitRepo, make_repo
from tests.support import write_config


def poll(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.005) -> None:
    """Poll an observable condition until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


_OPEN_STATES = {"01", "08"}  # ESTABLISHED, CLOSE_WAIT: a connection a server thread still holds


def port_busy(port: int) -> bool:
    """Whether a loopback server on ``port`` still holds a client connection (read from /proc/net/tcp).

    A handler thread keeps its socket until it has answered (or found the
    client gone) and closed it, so no open connection means no request in flight.
    """
    suffix = f":{port:04X}"
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            if fields[1].endswith(suffix) and fields[3] in _OPEN_STATES:
                return True
    return False


def wait_ports_quiet(ports: Sequence[int], timeout: float = 30) -> None:
    poll(lambda: not any(port_busy(p) for p in ports), timeout, f"the fakes on {list(ports)} to go quiet", 0.01)


class GitSpy:
    """A ``git`` that logs each invocation, then runs the real one (set as GIT_PYTHON_GIT_EXECUTABLE)."""

    def __init__(self, root: Path) -> None:
        real = shutil.which("git")
        assert real, "git is not installed"
        self.log = root / "git-calls.log"
        self.path = root / "git-spy"
        self.path.write_text(f'#!/bin/sh\necho "$$ $*" >> "{self.log}"\nexec "{real}" "$@"\n')
        self.path.chmod(self.path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    @property
    def env(self) -> dict[str, str]:
        return {"GIT_PYTHON_GIT_EXECUTABLE": str(self.path)}

    def calls(self) -> int:
        """Invocations that read the repository (GitPython's start-up ``git version`` left out)."""
        if not self.log.exists():
            return 0
        return sum(1 for line in self.log.read_text().splitlines() if line.split()[1:2] != ["version"])


def page_key(page: Mapping[str, Any]) -> str:
    """The ``Report Key`` of a page FakeNotion stored."""
    return "".join(item["plain_text"] for item in page["properties"]["Report Key"]["rich_text"])


def daily_history(root: Path, first_day: datetime, days: int, name: str = "repo") -> GitRepo:
    """A repository with two commits on each UTC day from ``first_day`` for ``days`` days."""
    repo = make_repo(root, name)
    for d in range(days):
        day = first_day + timedelta(days=d)
        repo.commit(f"feat: day {d} morning work", at=day.replace(hour=10),
                    files={f"src/mod{d % 5}.py": f"value = {d}\n"})
        repo.commit(f"fix: day {d} afternoon fix", at=day.replace(hour=15),
                    files={f"docs/day{d}.md": f"# day {d}\n"})
    return repo


def report_config(tmp: Path, *, db_url: str, repo: Path, project: str = "proj",
                  schedules: Sequence[Mapping[str, Any]] = (), worker: Mapping[str, Any] | None = None,
                  llm: Mapping[str, Any] | None = None, notion: Mapping[str, Any] | None = None,
                  reports_dir: str = "reports", name: str = "reportflow.toml") -> Path:
    """A report config: builtin LLM and Notion off unless ``llm``/``notion`` say otherwise."""
    sections: dict[str, Mapping[str, Any]] = {
        "worker": {"lease": "30s", "max_attempts": 10, "retry_backoff": "1s", "poll_interval": "0.2s",
                   **(worker or {})},
        "reports": {"dir": reports_dir},
        "llm": {"provider": "builtin", **(llm or {})},
        "notion": {"enabled": False, **(notion or {})},
    }
    return write_config(tmp / name, db_url=db_url, sections=sections,
                        projects=[{"key": project, "repo": str(repo), "branches": ["HEAD"]}],
                        schedules=schedules)


def daily_schedule(name: str, project: str, **extra: Any) -> dict[str, Any]:
    return dict(name=name, workflow="daily_report", project=project, cron="0 9 * * *", timezone="UTC",
                misfire="CATCH_UP_ALL", overlap="ALLOW", **extra)


@dataclass(frozen=True)
class RunRow:
    id: int
    business_key: str
    status: str
    steps: dict[str, str]


def sqlite_runs(db: Path) -> dict[str, RunRow]:
    """Every run of a SQLite database by idempotency key, with its step statuses (read-only)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        runs = conn.execute("SELECT id, idempotency_key, business_key, status FROM runs ORDER BY id").fetchall()
        steps = conn.execute("SELECT run_id, name, status FROM steps").fetchall()
    finally:
        conn.close()
    by_run: dict[int, dict[str, str]] = {}
    for run_id, name, status in steps:
        by_run.setdefault(run_id, {})[name] = status
    return {key: RunRow(run_id, bkey, status, by_run.get(run_id, {})) for run_id, key, bkey, status in runs}


def file_identity(path: Path) -> tuple[int, int] | None:
    """(inode, mtime_ns): an atomic rewrite gets a new inode even with the same bytes."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def tree_digest(root: Path, skip: Callable[[Path], bool] = lambda p: False) -> dict[str, str]:
    """Relative path -> sha256 (or ``<dir>``) of everything under ``root``."""
    import hashlib

    found: dict[str, str] = {}
    if not root.exists():
        return found
    for path in sorted(root.rglob("*")):
        if skip(path):
            continue
        rel = str(path.relative_to(root))
        found[rel] = "<dir>" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return found
