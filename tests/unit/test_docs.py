"""The docs name code that exists: every `module.name` of docs/DESIGN.md resolves, and no module is aliased.

A renamed module or function that the design notes still name fails here, so the
notes cannot drift from the tree unnoticed.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "steps", "workflows")
# Backticked dotted words that are not code of this repository: objects of a call site
# (`ctx.retry`, `conn.execute`), the standard library, file names and config keys.
FOREIGN = {"ctx", "conn", "sys", "after", "reportflow", "entry_points", "os", "time", "datetime", "run",
           "rt", "self", "pg_locks", "typer", "tomllib"}


def _modules() -> dict[str, str]:
    """Dotted name of every module of the code, keyed by itself and by each dotted suffix of it."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            dotted = ".".join(parts)
            for i in range(len(parts)):
                found.setdefault(".".join(parts[i:]), set()).add(dotted)
            for node in ast.parse(path.read_text()).body:  # a class is named on its own (`Worker.run_one`)
                if isinstance(node, ast.ClassDef):
                    found.setdefault(node.name, set()).add(f"{dotted}:{node.name}")
    return {suffix: next(iter(names)) for suffix, names in found.items() if len(names) == 1}


def _resolve(reference: str, modules: dict[str, str]) -> bool:
    parts = reference.removesuffix("()").split(".")
    for cut in range(len(parts), 0, -1):
        name = modules.get(".".join(parts[:cut]))
        if name is None:
            continue
        module, _, cls = name.partition(":")
        target: object = importlib.import_module(module)
        if cls:
            target = getattr(target, cls)
        for attr in parts[cut:]:
            if "::" in attr:
                return False
            if not hasattr(target, attr):
                return False
            target = getattr(target, attr)
        return True
    return False


def _references(text: str) -> list[str]:
    refs = []
    for match in re.finditer(r"`([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", text):
        ref = match.group(1)
        if ref.split(".")[0] in FOREIGN or ref.endswith((".py", ".txt", ".toml", ".md", ".html")):
            continue
        refs.append(ref)
    return refs


def test_every_code_reference_of_design_md_resolves() -> None:
    modules = _modules()
    refs = _references((ROOT / "docs" / "DESIGN.md").read_text())
    assert len(refs) > 20  # the notes do name code; a broken pattern would find nothing
    unresolved = sorted({r for r in refs if not _resolve(r, modules)})
    assert unresolved == []


def test_every_file_design_md_names_exists() -> None:
    text = (ROOT / "docs" / "DESIGN.md").read_text()
    named = set(re.findall(r"`((?:engine|steps|workflows|tests|bench|scripts)/[\w/.]+\.py)(?:::\w+)?`", text))
    assert named
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_no_module_of_the_code_is_imported_under_another_name() -> None:
    aliased = []
    for base in (*PACKAGES, "tests", "bench"):
        for path in (ROOT / base).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ImportFrom) or not node.module:
                    continue
                if node.module.split(".")[0] not in PACKAGES:
                    continue
                for alias in node.names:
                    module_path = ROOT / node.module.replace(".", "/") / f"{alias.name}.py"
                    if alias.asname and alias.asname != alias.name and module_path.exists():
                        aliased.append(f"{path.relative_to(ROOT)}: {node.module}.{alias.name} as {alias.asname}")
    assert aliased == []


def test_the_readme_names_the_prompt_version_new_runs_get() -> None:
    """Issue 43, item 9: the README named prompt v3 while new runs were pinned to v4."""
    from workflows.report_settings import LlmSettings

    default = LlmSettings().prompt_version
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f'`prompt_version = "{default}"`' in readme and f"daily_report.{default}.md" in readme
    assert f"`{default}` is the default for new runs" in readme


def test_the_module_map_is_what_the_docstrings_say() -> None:
    """Issue 44, item 6: the map of modules is generated from each module's first sentence, so a module added,
    moved or renamed without running ``scripts/module_map.py`` fails here, not in a reader's hands."""
    root = pathlib.Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "scripts" / "module_map.py"), "--check"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    listed = (root / "docs" / "MODULES.md").read_text()
    assert "`workflows/report_pins.py`: What a report's run pins" in listed
    assert all(f"`{p.relative_to(root)}`" in listed for p in (root / "steps").glob("*.py") if p.name != "__init__.py")
