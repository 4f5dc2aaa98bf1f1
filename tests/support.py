"""Helpers for building runtimes and configs in tests."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from engine.config import config_file
from engine.core.clock import Clock, ManualClock
from engine.core.models import NewRun, RunStatus, RunTrigger
from engine.plugins.contract import WorkflowDef
from engine.plugins.workflow_registry import Registry, load_registry
from engine.runtime import Runtime
from engine.store import database
from engine.store.handle import Store

if TYPE_CHECKING:
    from engine.execution.worker import Worker

REPO_ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "engine.cli"]


_template: list[Path] = []


def sqlite_template() -> Path:
    """A SQLite database migrated to head, made once per process (per xdist worker) and removed at exit."""
    if not _template:
        folder = Path(tempfile.mkdtemp(prefix="rf-template-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / "template.db"
        Store.open(f"sqlite:///{path}", auto_migrate=True).engine.dispose()
        # The last connection closed checkpoints the WAL: the main file alone is the whole database.
        assert not path.with_name(path.name + "-wal").exists(), "the template's WAL was not checkpointed"
        _template.append(path)
    return _template[0]


def copy_migrated_sqlite(path: Path) -> None:
    """Put a migrated database at ``path`` (a copy of the template: Alembic runs once per process, not per test)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sqlite_template(), path)


@dataclass
class ManualRuntime(Runtime):
    """A runtime on a manual clock: time passes only when the test moves it (``rt.clock.advance``)."""

    clock: ManualClock


def make_runtime(url: str, *, schedules: Sequence[Mapping[str, Any]] = (), clock: Clock | None = None,
                 registry: Registry | None = None, extra: Mapping[str, Any] | None = None,
                 base_dir: Path | None = None) -> Runtime:
    """A runtime over the migrated database at ``url`` for ``schedules`` (not applied), config sections in
    ``extra``, the installed workflows unless ``registry`` is given, and a manual clock unless ``clock`` is."""
    raw: dict[str, Any] = {"schedules": [dict(s) for s in schedules], **(extra or {})}
    reg = registry if registry is not None else load_registry()
    cfg = config_file.build_config(raw, path=(base_dir / "reportflow.toml") if base_dir else None, registry=reg,
                                  db_override=url)
    path = database.sqlite_path(cfg.store_url)
    if path is not None and not path.exists():
        copy_migrated_sqlite(path)
    store = Store.open(cfg.store_url, auto_migrate=True)
    if clock is None or isinstance(clock, ManualClock):
        return ManualRuntime(store=store, registry=reg, config=cfg, clock=clock or ManualClock(config_mod_now()),
                             actor="tester")
    return Runtime(store=store, registry=reg, config=cfg, clock=clock, actor="tester")


class RuntimeFactory:
    """The ``runtime`` fixture: builds typed runtimes on a manual clock and closes their stores after the test."""

    def __init__(self) -> None:
        self.built: list[Runtime] = []

    def __call__(self, url: str, *, schedules: Sequence[Mapping[str, Any]] = (), at: datetime | None = None,
                 workflows: Mapping[str, WorkflowDef] | None = None, installed: bool = True,
                 config: Mapping[str, Any] | None = None, base_dir: Path | None = None,
                 apply: bool = False) -> ManualRuntime:
        """A runtime at ``at`` (default ``config_mod_now()``) whose registry is the installed workflows (unless
        ``installed`` is False) plus ``workflows``, with ``config``'s sections; ``apply`` syncs ``schedules``."""
        registry: Registry = {**(load_registry() if installed else {}), **(workflows or {})}
        rt = make_runtime(url, schedules=schedules, clock=ManualClock(at or config_mod_now()), registry=registry,
                          extra=config, base_dir=base_dir)
        assert isinstance(rt, ManualRuntime)
        self.built.append(rt)
        if apply:
            from engine.scheduling import definitions

            definitions.apply(rt)
        return rt

    def close(self) -> None:
        for rt in self.built:
            rt.store.dispose()


@pytest.fixture
def runtime() -> Iterator[RuntimeFactory]:
    """Build runtimes as ``runtime(url, schedules=[...], at=T0, workflows={...}, config={...}, apply=True)``."""
    factory = RuntimeFactory()
    yield factory
    factory.close()


def manual_run(key: str, at: datetime, *, workflow: str = "four_steps", project: str = "p1") -> NewRun:
    """A QUEUED manual run of ``workflow`` with key ``key`` and slot ``at``, outside any schedule."""
    return NewRun(workflow=workflow, project=project, trigger=RunTrigger.MANUAL, scheduled_for=at, business_key=key,
                  base_key=key, idempotency_key=key, status=RunStatus.QUEUED, priority=30,
                  pinned={"payload_version": 1}, max_attempts=3, max_runtime_s=600, created_at=at)


def config_mod_now() -> datetime:
    return datetime(2026, 9, 29, 10, 0, tzinfo=UTC)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):  # an inline table
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_config(path: Path, *, db_url: str | None = None, sections: Mapping[str, Mapping[str, Any]] | None = None,
                 projects: Sequence[Mapping[str, Any]] = (), schedules: Sequence[Mapping[str, Any]] = ()) -> Path:
    lines: list[str] = []
    if db_url:
        lines += ["[store]", f"url = {toml_value(db_url)}", ""]
    for name, values in (sections or {}).items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in values.items()]
        lines.append("")
    for table, items in (("projects", projects), ("schedules", schedules)):
        for item in items:
            lines.append(f"[[{table}]]")
            lines += [f"{k} = {toml_value(v)}" for k, v in item.items()]
            lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def run_cli(*args: str, config: Path | None = None, now: str | None = None, env: Mapping[str, str] | None = None,
            cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess (what a user runs)."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    full_env.pop("REPORTFLOW_NOW", None)
    command = [*CLI]
    if config is not None:
        command += ["--config", str(config)]
    if now is not None:
        command += ["--now", now]
    command += list(args)
    return subprocess.run(command, capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout)


# Runs the CLI's ``main`` and, at exit (an error exit too), writes the sorted ``sys.modules`` to a file.
MODULES_WRAPPER = """
import atexit, os, sys
def _dump():
    with open(os.environ["RF_MODULES_OUT"], "w") as fh:
        fh.write("\\n".join(sorted(sys.modules)))
atexit.register(_dump)
sys.argv = ["reportflow", *sys.argv[1:]]
from engine.cli.main import main
main()
"""


def run_cli_modules(*args: str, cwd: Path, env: Mapping[str, str] | None = None,
                    timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``reportflow *args`` in a fresh interpreter, and the modules it had loaded when it exited."""
    out = cwd / "modules.txt"
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RF_MODULES_OUT": str(out), **(env or {})}
    full_env.pop("REPORTFLOW_NOW", None)
    proc = subprocess.run([sys.executable, "-c", MODULES_WRAPPER, *args], capture_output=True, text=True, cwd=cwd,
                          env=full_env, timeout=timeout)
    return proc, set(out.read_text().split())


def drain(worker: Worker) -> list[RunStatus]:
    """Run ``worker`` until nothing is left to claim; each run's status, in the order they ended."""
    done = []
    while (outcome := worker.run_one()) is not None:
        done.append(outcome.status)
    return done
