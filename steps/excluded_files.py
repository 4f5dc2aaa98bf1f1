"""Excluded files: which of a commit's files a report leaves out of its statistics.

A file is excluded when ``.gitattributes`` at the head marks it ``linguist-generated`` or ``linguist-vendored``
(as GitHub Linguist, and so most forges, would), or when one of the configured ``exclude`` globs matches it.
Excluded files stay in COLLECT_GIT's output, marked.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path

from steps import git_log, git_repo

#: What GitHub Linguist (and so most forges) leave out of a repository's statistics.
LINGUIST_ATTRIBUTES = ("linguist-generated", "linguist-vendored")


def exclude_matches(path: str, globs: Sequence[str]) -> bool:
    """Whether a repository path matches one of ``globs``.

    A glob matches the whole path (``*`` also crosses ``/``: ``vendor/*`` is
    everything under ``vendor``); a glob without ``/`` also matches the file
    name anywhere (``*.lock``); a glob ending in ``/`` matches a directory's
    contents at any depth (``.venv/``).
    """
    name = path.rsplit("/", 1)[-1]
    for glob in globs:
        if glob.endswith("/"):
            directory = glob.rstrip("/")
            if fnmatch.fnmatchcase(path, f"{directory}/*") or fnmatch.fnmatchcase(path, f"*/{directory}/*"):
                return True
        elif fnmatch.fnmatchcase(path, glob) or ("/" not in glob and fnmatch.fnmatchcase(name, glob)):
            return True
    return False


def mark_excluded(repo_dir: Path, head: str, commits: list[git_log.RawCommit], globs: Sequence[str]) -> None:
    """Set ``excluded`` on the files marked generated/vendored at ``head`` or matched by ``globs``."""
    paths = sorted({f["path"] for c in commits for f in c["files"]})
    handle = git_repo.open_repo(repo_dir)
    marked = git_log.attribute_set(repo_dir, head, paths, LINGUIST_ATTRIBUTES) if paths and git_log.attributes_may_apply(
        repo_dir, Path(handle.common_dir), head, paths) else set()
    marked.update(p for p in paths if exclude_matches(p, globs))
    for commit in commits:
        for change in commit["files"]:
            if change["path"] in marked:
                change["excluded"] = True
