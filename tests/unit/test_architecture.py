"""The architecture rules the code relies on, checked on the source itself."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WALL_CLOCK = re.compile(r"datetime\.now\(|datetime\.utcnow\(|time\.time\(|time\.sleep\(")


def sources(*packages: str) -> list[Path]:
    return [p for package in packages for p in sorted((ROOT / package).rglob("*.py"))]


def test_only_the_clock_module_reads_wall_time_or_sleeps() -> None:
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in sources("engine", "steps", "workflows")
                 if p.name != "clock.py" or p.parent.name != "core"
                 for n, line in enumerate(p.read_text().splitlines(), 1) if WALL_CLOCK.search(line)]
    assert offenders == []


def test_the_engine_imports_nothing_from_workflows_or_steps() -> None:
    offenders = []
    for path in sources("engine"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in ("workflows", "steps")]
    assert offenders == []


def test_steps_know_nothing_about_scheduling_or_the_store() -> None:
    forbidden = ("engine.store", "engine.scheduling", "engine.execution", "engine.operations", "sqlalchemy")
    offenders = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in sources("steps")
                 for line in p.read_text().splitlines()
                 if line.startswith(("from ", "import ")) and any(f in line for f in forbidden)]
    assert offenders == []


def test_workflows_are_declared_as_entry_points() -> None:
    from engine.plugins.registry import load_registry

    registry = load_registry()
    assert {"daily_report", "weekly_report", "echo"} <= set(registry)
    assert registry["daily_report"].step_names() == ("COLLECT_GIT", "GENERATE_REPORT", "SAVE_MARKDOWN",
                                                     "UPLOAD_NOTION")

