"""Write docs/MODULES.md: one line per module of engine/, steps/ and workflows/, from its docstring's first sentence.

Usage: .venv/bin/python scripts/module_map.py [--check]   (--check: exit 1 when the file is not what this writes)

The map is generated, so it cannot go stale: tests/unit/test_docs.py runs the check.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "MODULES.md"
PACKAGES = ("engine", "steps", "workflows")


def first_sentence(doc: str) -> str:
    """The docstring's first sentence (its first paragraph up to a full stop), on one line."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    found = re.search(r"^(.+?\.)(\s|$)", paragraph)
    return found.group(1) if found else paragraph


def render() -> str:
    lines = ["# Modules", "",
             "One line per module, from its docstring (`scripts/module_map.py` writes this file; a test checks it).",
             "The layers and the rules between them are in [DESIGN.md](DESIGN.md#the-map).", ""]
    for package in PACKAGES:
        folders: dict[str, list[str]] = {}
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "__init__.py" or "migrations" in path.parts:
                continue
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            folder = str(path.parent.relative_to(ROOT))
            folders.setdefault(folder, []).append(f"- `{path.relative_to(ROOT)}`: {first_sentence(doc)}")
        for folder, entries in folders.items():
            lines += [f"## `{folder}/`", "", *entries, ""]
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run .venv/bin/python scripts/module_map.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
