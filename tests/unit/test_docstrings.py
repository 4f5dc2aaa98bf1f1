"""Every public function and method of engine/ says what it is for (SPEC: a one-line docstring)."""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"


def undocumented(source: str, where: str) -> list[str]:
    """Public functions and methods of ``source`` without a docstring (``@overload`` stubs aside)."""
    found: list[str] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                stub = any(getattr(d, "id", getattr(d, "attr", "")) == "overload" for d in node.decorator_list)
                if not stub and ast.get_docstring(node) is None:
                    found.append(f"{where}:{node.lineno} {prefix}{node.name}")
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{prefix}{node.name}.")

    visit(ast.parse(source).body, "")
    return found


def test_every_public_engine_function_has_a_docstring() -> None:
    missing = [m for path in sorted(ENGINE.rglob("*.py")) if "migrations" not in path.parts
               for m in undocumented(path.read_text(), str(path.relative_to(ENGINE.parent)))]
    assert missing == []


def test_the_check_sees_methods_and_skips_private_ones_and_overloads() -> None:
    code = '''
def f(): pass
def _g(): pass
class C:
    def m(self): pass
    def n(self):
        """Said."""
    @overload
    def o(self): ...
'''
    assert undocumented(code, "x") == ["x:2 f", "x:5 C.m"]
