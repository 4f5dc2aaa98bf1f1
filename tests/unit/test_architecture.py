"""The architecture rules the code relies on, checked on the source itself."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Calls that read wall time or sleep: the clock module's to make, everyone else's to ask a Clock for.
WALL_CLOCK_CALLS = {("time", "time"), ("time", "monotonic"), ("time", "perf_counter"), ("time", "sleep"),
                    ("datetime", "now"), ("datetime", "utcnow"), ("date", "today"), ("nap", "sleep")}
WALL_CLOCK_NAMES = {"SystemClock"}  # a SystemClock() built anywhere but in engine/core/clock.py
WALL_CLOCK_IMPORTS = {"time": {"time", "monotonic", "perf_counter", "sleep"}, "tenacity": {"nap"},
                      "tenacity.nap": {"sleep"}}


def sources(*packages: str) -> list[Path]:
    return [p for package in packages for p in sorted((ROOT / package).rglob("*.py"))]


def imports(tree: ast.AST) -> list[tuple[str, str | None]]:
    """Every import of a module, indented ones included: (module, name imported from it or None)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.module, alias.name) for alias in node.names]
    return found


def wall_clock_reads(tree: ast.AST) -> list[str]:
    """The wall-clock reads and sleeps in ``tree``: calls, constructions and the imports that bring them in."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                owner = func.value.attr if isinstance(func.value, ast.Attribute) else getattr(func.value, "id", "")
                if (owner, func.attr) in WALL_CLOCK_CALLS or func.attr in WALL_CLOCK_NAMES:
                    found.append(f"{node.lineno}: {owner}.{func.attr}()")
            elif isinstance(func, ast.Name) and func.id in WALL_CLOCK_NAMES:
                found.append(f"{node.lineno}: {func.id}()")
    for module, name in imports(tree):
        if name is not None and name in WALL_CLOCK_IMPORTS.get(module, set()):
            found.append(f"from {module} import {name}")
    return found


def test_only_the_clock_module_reads_wall_time_or_sleeps() -> None:
    offenders = [f"{p.relative_to(ROOT)}:{read}" for p in sources("engine", "steps", "workflows")
                 if p != ROOT / "engine" / "core" / "clock.py"
                 for read in wall_clock_reads(ast.parse(p.read_text()))]
    assert offenders == []


def test_the_wall_clock_check_sees_what_it_forbids() -> None:
    code = """
import time
from tenacity import nap
def f(clock):
    if clock:
        from time import monotonic
    time.monotonic(); datetime.now(UTC); SystemClock(); clock.SystemClock(); tenacity.nap.sleep(1)
"""
    assert len(wall_clock_reads(ast.parse(code))) == 7
    assert wall_clock_reads(ast.parse("clock.REAL.monotonic(); rt.clock.now(); ctx.sleep(1)")) == []


def test_the_engine_imports_nothing_from_workflows_or_steps() -> None:
    offenders = [f"{path.relative_to(ROOT)}: {module}" for path in sources("engine")
                 for module, _ in imports(ast.parse(path.read_text()))
                 if module.split(".")[0] in ("workflows", "steps")]
    assert offenders == []


def test_steps_know_nothing_about_scheduling_or_the_store() -> None:
    forbidden = ("engine.store", "engine.scheduling", "engine.execution", "engine.operations", "sqlalchemy")
    offenders = [f"{p.relative_to(ROOT)}: {module}" for p in sources("steps")
                 for module, _ in imports(ast.parse(p.read_text()))
                 if any(module == f or module.startswith(f + ".") for f in forbidden)]
    assert offenders == []


def test_in_step_retries_have_one_definition() -> None:
    """tenacity is used in one place, ``engine.plugins.retrying`` (``ctx.retry``); steps and the worker call it."""
    helper = ROOT / "engine" / "plugins" / "retrying.py"
    users = [str(p.relative_to(ROOT)) for p in sources("engine", "steps", "workflows") if p != helper
             if any(module.split(".")[0] == "tenacity" for module, _ in imports(ast.parse(p.read_text())))]
    assert users == []


def test_workflows_are_declared_as_entry_points() -> None:
    from engine.plugins.workflow_registry import load_registry

    registry = load_registry()
    assert {"daily_report", "weekly_report", "echo"} <= set(registry)
    assert registry["daily_report"].step_names() == ("COLLECT_GIT", "GENERATE_REPORT", "SAVE_MARKDOWN",
                                                     "UPLOAD_NOTION", "DELIVER")

