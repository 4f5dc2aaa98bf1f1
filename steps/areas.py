"""Where in a repository a change is: its area, and whether it is source, tests or docs.

An area is a directory a reader recognises. The top-level folder alone says nothing in a
src-layout repository (everything is in ``src``), so below a source root the area goes
deeper: ``src/flask/json/provider.py`` is in ``src/flask/json``, ``src/requests/models.py``
in ``src/requests``. Below a monorepo root it is the package: ``packages/ui/src/x.ts`` is in
``packages/ui``. Elsewhere it is the top-level folder, and top-level files share one area
(``ROOT``). The rule reads the path only, so a file is in the same area in every report.

A commit's area is taken from its source change: a fix to ``src/`` with a larger test is a
change to ``src``, not to ``tests`` (``main_path_kind`` orders source, then tests, then docs).
"""

from __future__ import annotations

import re
from enum import IntEnum
from pathlib import PurePosixPath

#: The area of files at the top of the repository.
ROOT = "(root)"

#: Folders that hold code one or two package levels down (``src/pkg/sub``).
SOURCE_ROOTS = frozenset({"src", "lib", "source", "sources", "pkg", "internal", "cmd"})
#: Folders whose children are packages of their own (``packages/ui``).
MONOREPO_ROOTS = frozenset({"packages", "apps", "libs", "crates", "modules", "services", "plugins"})
TEST_DIRS = frozenset({"tests", "test", "testing", "spec", "specs", "__tests__", "e2e"})
DOC_DIRS = frozenset({"docs", "doc", "documentation"})
_TEST_FILE = re.compile(r"(^test_.*\.py$)|(_test\.(py|go|rb|exs?)$)|(\.(test|spec)\.[cm]?[jt]sx?$)|(Tests?\.(java|kt|cs|swift)$)")
_DOC_FILE = re.compile(r"\.(md|rst|txt|adoc)$|^(README|CHANGES|CHANGELOG|HISTORY|NEWS|AUTHORS|LICENSE|COPYING)", re.I)


class PathKind(IntEnum):
    """What a changed file is, in the order a commit's area prefers them."""

    SOURCE = 0
    TESTS = 1
    DOCS = 2


def area_of(path: str) -> str:
    """The area of ``path`` (a repository-relative POSIX path)."""
    parts = path.split("/")
    dirs = parts[:-1]
    if not dirs:
        return ROOT
    if dirs[0] in MONOREPO_ROOTS and len(dirs) >= 2:
        return "/".join(dirs[:2])
    if dirs[0] in SOURCE_ROOTS:
        return "/".join(dirs[:3])
    return dirs[0]


def kind_of(path: str) -> PathKind:
    """Whether ``path`` is a test, documentation, or (anything else) source."""
    parts = path.split("/")
    name = parts[-1]
    if any(part in TEST_DIRS for part in parts[:-1]) or _TEST_FILE.search(name):
        return PathKind.TESTS
    if any(part in DOC_DIRS for part in parts[:-1]) or (
            _DOC_FILE.search(name) and PurePosixPath(name).suffix.lower() not in (".py", ".go", ".rs", ".js", ".ts")):
        return PathKind.DOCS
    return PathKind.SOURCE
