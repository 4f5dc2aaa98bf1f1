"""The store owns the SQL: the layers above it ask ``engine/store/`` functions for rows and never build a statement.

A module of ``read/``, ``scheduling/``, ``operations/`` or ``cli/`` that imports SQLAlchemy's statement
builders (``select``, ``insert``, ``update``, ``delete``, ``text``) or the table definitions
(``engine.store.tables``) fails here, indented imports included. ``Connection`` (a type), the URL
helpers and the exception classes are not statements and stay allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"
ABOVE_THE_STORE = ("read", "scheduling", "operations", "cli")
BUILDERS = {"select", "insert", "update", "delete", "text"}
# module (relative to engine/) -> why it may build SQL. Keep it short: each entry is a debt or a measured need.
ALLOWED: dict[str, str] = {}


def sql_imports(path: Path) -> list[str]:
    """What ``path`` imports that builds SQL, as ``line: name``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "sqlalchemy":
                found += [f"{node.lineno}: {node.module}.{a.name}" for a in node.names if a.name in BUILDERS]
            if node.module == "engine.store.tables" or (node.module == "engine.store"
                                                        and any(a.name == "tables" for a in node.names)):
                found.append(f"{node.lineno}: engine.store.tables")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: {a.name}" for a in node.names
                      if a.name in ("sqlalchemy", "engine.store.tables") or a.name.startswith("sqlalchemy.sql")]
        elif isinstance(node, ast.Attribute) and node.attr in BUILDERS and isinstance(node.value, ast.Name) \
                and node.value.id in ("sqlalchemy", "sa"):
            found.append(f"{node.lineno}: sqlalchemy.{node.attr}")
    return found


def test_no_module_above_the_store_builds_sql() -> None:
    offenders = []
    for layer in ABOVE_THE_STORE:
        for path in sorted((ENGINE / layer).rglob("*.py")):
            name = str(path.relative_to(ENGINE))
            if name in ALLOWED:
                continue
            offenders += [f"{name}:{hit}" for hit in sql_imports(path)]
    assert offenders == []


def test_the_allow_list_names_modules_that_still_need_it() -> None:
    stale = [name for name in ALLOWED if not sql_imports(ENGINE / name)]
    assert stale == []


def test_the_check_sees_a_statement_builder(tmp_path: Path) -> None:
    module = tmp_path / "leaky.py"
    module.write_text("def f():\n    from sqlalchemy import select\n    from engine.store.tables import runs\n"
                      "    return select(runs)\n")
    assert sql_imports(module) == ["2: sqlalchemy.select", "3: engine.store.tables"]
