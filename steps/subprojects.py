"""A sub-project of a repository: a project whose ``paths`` (and ``exclude_paths``) keep a part of it.

Each is a folder prefix (``services/api/``; a file's own path works too), relative to the repository's root.
A commit belongs to the sub-project when it changed a file there (a rename, when either side is there); it is
kept with those files only, its line counts theirs. Everything else about a report is unchanged: its range and
edges come from the whole branch, so coverage and placement hold per project, and a commit touching two
sub-projects is in each one's report. Areas are named below the sub-project's root (``root_of``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from steps.git_log import CommitInfo, FileChange


def normalise(path: str) -> str:
    """``services/api`` and ``./services/api/`` as ``services/api``; ValueError for a path outside the repository."""
    clean = posixpath.normpath(path.strip().replace("\\", "/")).strip("/")
    if not clean or clean == "." or clean == ".." or clean.startswith("../") or posixpath.isabs(path.strip()):
        raise ValueError(f"{path!r} is not a folder inside the repository (e.g. \"services/api/\")")
    return clean


def _under(path: str, prefixes: Sequence[str]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def holds(change: FileChange, paths: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether ``change`` is inside the sub-project: under ``paths`` (all of it when none) and not ``exclude``."""
    sides = [change.path, *([change.old_path] if change.old_path else [])]
    return any((not paths or _under(side, paths)) and not _under(side, exclude) for side in sides)


def within(commits: Sequence[CommitInfo], paths: Sequence[str], exclude: Sequence[str]) -> list[CommitInfo]:
    """The ``commits`` that changed the sub-project, each with its files there only."""
    if not paths and not exclude:
        return list(commits)
    kept = []
    for commit in commits:
        files = [f for f in commit.files if holds(f, paths, exclude)]
        if files:
            kept.append(commit.model_copy(update={"files": files, "insertions": sum(f.insertions for f in files),
                                                  "deletions": sum(f.deletions for f in files)}))
    return kept


def root_of(path: str, roots: Sequence[str]) -> str:
    """``path`` below the sub-project's root that holds it (``services/api/handlers/x.py`` → ``handlers/x.py``)."""
    for root in roots:
        if path.startswith(root + "/"):
            return path[len(root) + 1:]
    return path
