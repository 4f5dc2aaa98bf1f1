"""The layout is the architecture: each engine subpackage imports only those listed before it.

Every import counts, indented ones (inside functions, under ``TYPE_CHECKING``) included: a lazy
import that points the wrong way is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"
# Ground first, doors last (docs/DESIGN.md, "The map").
LAYERS = ("core", "config", "plugins", "store", "alert_transports", "runtime", "scheduling", "execution", "operations",
          "read", "web", "app", "cli")


def imported_layers(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "engine"]
        for name in names:
            parts = name.split(".")
            if parts[0] == "engine" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
    return found


def test_every_module_lives_in_a_layer() -> None:
    strays = [p.name for p in ENGINE.glob("*.py") if p.stem not in (*LAYERS, "__init__")]
    packages = {p.name for p in ENGINE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert strays == [] and packages <= set(LAYERS), (strays, packages - set(LAYERS))


def test_each_layer_imports_only_the_layers_before_it() -> None:
    offenders = []
    for path in sorted(ENGINE.rglob("*.py")):
        own = path.relative_to(ENGINE).parts[0].removesuffix(".py")
        if own == "__init__":
            continue
        offenders += [f"{path.relative_to(ENGINE.parent)}:{line}: {own} -> {other}"
                      for line, other in imported_layers(path)
                      if other in LAYERS and LAYERS.index(other) > LAYERS.index(own)]
    assert offenders == []


def test_subpackage_inits_import_nothing() -> None:
    """The fast paths count imports: loading ``engine.store.database`` must not load the rest of ``store``."""
    busy = [str(p.relative_to(ENGINE.parent)) for p in ENGINE.rglob("__init__.py")
            if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(ast.parse(p.read_text())))]
    assert busy == []


def _module_imports(package: str) -> dict[str, set[str]]:
    """For each module of ``engine/<package>``, the modules of that same package it imports."""
    prefix = f"engine.{package}"
    own = {p.stem for p in (ENGINE / package).glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name in own:
        found: set[str] = set()
        for node in ast.walk(ast.parse((ENGINE / package / f"{name}.py").read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[2] for a in node.names if a.name.startswith(prefix + ".")}
            elif isinstance(node, ast.ImportFrom) and node.module == prefix:
                found |= {a.name for a in node.names if a.name in own}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(prefix + "."):
                found.add(node.module.split(".")[2])
        graph[name] = found - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (its modules in order, the first repeated at the end), or []."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str]:
        if name in path:
            return path[path.index(name):] + [name]
        if name in done:
            return []
        for other in sorted(graph.get(name, ())):
            if found := visit(other, [*path, name]):
                return found
        done.add(name)
        return []

    for start in sorted(graph):
        if found := visit(start, []):
            return found
    return []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycle({"loop": {"worker"}, "worker": {"loop"}, "pool": {"loop"}}) == ["loop", "worker", "loop"]
    assert _cycle({"pool": {"worker", "loop"}, "worker": {"lease"}, "lease": set(), "loop": set()}) == []


def test_no_import_circle_inside_execution() -> None:
    """The pool builds the loops that drive the workers: no module of ``execution`` imports one that imports it back
    (a lazy import, inside a function or under ``TYPE_CHECKING``, counts too)."""
    graph = _module_imports("execution")
    assert {"loop", "pool", "worker", "lease", "step_call"} <= set(graph)
    assert _cycle(graph) == []


def _module_graph(*tops: str) -> dict[str, set[str]]:
    """Every module under the packages ``tops`` (nested packages included), by dotted name, and the modules among them
    it imports (``from P import m`` counts as importing ``P.m`` when that is a module)."""
    root = ENGINE.parent
    files = {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
             for top in tops for p in sorted((root / top).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module
                          for a in node.names}
        graph[name] = {other for other in found if other in files} - {name}
    return graph


def test_no_import_circle_inside_any_package() -> None:
    """Issue 44, item 3: ``config.backup_config`` and ``config.config_file`` imported each other (the first lazily);
    every package of the engine is checked now, not only ``execution``."""
    packages = sorted(p.name for p in ENGINE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert {"config", "core", "execution", "store", "web"} <= set(packages)
    circles = {package: _cycle(_module_imports(package)) for package in packages}
    assert {package: circle for package, circle in circles.items() if circle} == {}


def test_no_import_circle_anywhere_in_the_code() -> None:
    """One graph of every module of ``engine/`` (nested packages such as ``core/cron/`` included, and across packages)
    ``steps/`` and ``workflows/``: no module imports one that imports it back, however long the way round."""
    graph = _module_graph("engine", "steps", "workflows")
    assert {"engine.core.cron.timetable", "engine.core.models", "engine.core.schedule_spec",
            "steps.collect_git", "steps.git_history"} <= set(graph)
    assert "engine.core.schedule_spec" in graph["engine.core.models"]
    assert _cycle(graph) == []
