"""A repository as COLLECT_GIT reads it: opened once per path, its branches resolved, missing commits fetched.

Every git step reads a repository through here: ``open_repo`` keeps GitPython's handles, ``resolve_branches`` reads
a branch from the ref store without a subprocess where it can, ``check_pinned``/``fetch_missing`` make pinned heads
present (one fetch, else ``GIT_COMMIT_NOT_FOUND``, retryable so another node can take the run), and
``unreadable_error`` says what a failed git means.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path

import git

from engine.core import errors
from steps import git_log, git_range, untrusted
from steps.git_log import GitFailure

FETCH_TIMEOUT_S = 120.0

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
# Where a branch name is looked up in-process, branches first; anything else (tags,
# which may need peeling, or expressions) is resolved by git itself.
_DWIM = ("refs/heads/{}", "refs/remotes/{}", "refs/remotes/{}/HEAD")

_HANDLES_KEPT = 32
_HANDLES: dict[str, git.Repo] = {}
_HANDLES_LOCK = threading.Lock()


def current_heads(repo_path: Path, branches: list[str]) -> dict[str, str]:
    """Each configured branch's head now; GIT_REPO_SHALLOW for a shallow clone (its history is cut)."""
    handle = open_repo(repo_path)
    repo_dir = Path(handle.working_tree_dir or handle.git_dir)
    if git_range.is_shallow(Path(handle.common_dir)):
        raise errors.step_error("GIT_REPO_SHALLOW", f"{repo_dir} is a shallow clone: its history stops short, so "
                                "what a report holds cannot be told; run `git fetch --unshallow` there")
    return resolve_branches(handle, repo_dir, branches)


def directory_of(repo_path: Path) -> Path:
    """The repository's working tree (its git directory when bare)."""
    handle = open_repo(repo_path)
    return Path(handle.working_tree_dir or handle.git_dir)


def present_or_fetched(repo_dir: Path, shas: Sequence[str]) -> set[str]:
    """The commits of ``shas`` present here, after one fetch if some were missing."""
    wanted = list(dict.fromkeys(shas))
    present = git_range.existing(repo_dir, wanted)
    if len(present) < len(wanted):
        _fetch(repo_dir)
        present = git_range.existing(repo_dir, wanted)
    return present


def open_repo(repo_path: Path) -> git.Repo:
    """GitPython's handle on the repository at ``repo_path``; GIT_REPO_NOT_FOUND otherwise.

    Handles are kept per path (at most ``_HANDLES_KEPT``) and reused while their
    git directory still has a ``HEAD``: opening one costs more than the rest of
    the Python work of a daily collect, and a handle holds no state that can go
    stale (refs are read from disk on every lookup; git runs as a subprocess).
    """
    key = os.path.abspath(repo_path)
    handle = _HANDLES.get(key)
    if handle is not None and os.path.isfile(os.path.join(handle.git_dir, "HEAD")):
        return handle
    try:
        handle = git.Repo(repo_path)
    except (git.NoSuchPathError, git.InvalidGitRepositoryError, OSError) as exc:
        _HANDLES.pop(key, None)
        raise errors.step_error(
            "GIT_REPO_NOT_FOUND", f"no git repository at {repo_path} ({type(exc).__name__})"
        ) from exc
    with _HANDLES_LOCK:
        while len(_HANDLES) >= _HANDLES_KEPT:
            _HANDLES.pop(next(iter(_HANDLES)))
        _HANDLES[key] = handle
    return handle


def unreadable_error(repo_dir: Path, exc: GitFailure) -> errors.ReportflowError:
    """What a failed git means: a git killed by a signal interrupted the step (the run is handed back)."""
    if exc.killed:
        return errors.Interrupted(f"git was stopped by a signal while reading {repo_dir}: {exc}")
    return errors.step_error("GIT_REPO_NOT_FOUND", f"cannot read git repository {repo_dir}: {exc}")


def _lookup(repo_dir: Path, exprs: Sequence[str]) -> dict[str, str | None]:
    """Resolve revisions to commit SHAs in one ``git cat-file`` call (None: no such commit)."""
    request = "".join(f"{e}^{{commit}}\n" for e in exprs).encode()
    try:
        out = git_log.run(repo_dir, ["cat-file", "--batch-check=%(objectname)"], stdin=request)
    except GitFailure as exc:
        raise unreadable_error(repo_dir, exc) from exc
    answers = out.decode("utf-8", "replace").splitlines()
    return {e: (a if _SHA.match(a) else None) for e, a in zip(exprs, answers, strict=True)}


def _read_ref(repo: git.Repo, name: str) -> str | None:
    """A branch's SHA read straight from the ref store (no subprocess), or None.

    Only refs that git guarantees to point at a commit (HEAD, local and
    remote-tracking branches) are answered here; tags and expressions such as
    ``main~1`` are left to ``git cat-file``.
    """
    if any(c in name for c in "~^:@*?[\\"):
        return None
    if name == "HEAD" or name.startswith(("refs/heads/", "refs/remotes/")):
        candidates: tuple[str, ...] = (name,)
    else:
        candidates = tuple(pattern.format(name) for pattern in _DWIM)
    for path in candidates:
        try:
            sha = git.SymbolicReference.dereference_recursive(repo, path)
        except (ValueError, OSError, git.GitError):
            continue
        return sha if _SHA.match(sha) else None
    return None


def resolve_branches(repo: git.Repo, repo_dir: Path, branches: Sequence[str]) -> dict[str, str]:
    """Resolve each configured branch now; an unknown one is a config problem (permanent)."""
    if not branches:
        raise errors.step_error("CONFIG_INVALID", "no branches configured for the project")
    for branch in branches:
        if not branch or branch.startswith("-") or any(c.isspace() for c in branch):
            raise errors.step_error("CONFIG_INVALID", f"invalid branch name {branch!r}")
    found: dict[str, str | None] = {b: _read_ref(repo, b) for b in branches}
    rest = [b for b, sha in found.items() if sha is None]
    if rest:
        found.update(_lookup(repo_dir, rest))
    missing = [b for b, sha in found.items() if sha is None]
    if missing:
        raise errors.step_error(
            "CONFIG_INVALID",
            f"repository {repo_dir} has no commit at branch {', '.join(map(repr, missing))} "
            "(check projects[].branches)")
    return {b: sha for b, sha in found.items() if sha is not None}


def check_pinned(pinned: dict[str, str]) -> dict[str, str]:
    for ref, sha in pinned.items():
        if not isinstance(sha, str) or not _SHA.match(sha):
            raise errors.step_error("CONFIG_INVALID",
                                    f"pinned head {ref!r} is not a full SHA: {sha!r}")
    return dict(pinned)


def fetch_missing(repo_dir: Path, pinned: dict[str, str]) -> None:
    """Fetch once when pinned SHAs are missing; GIT_COMMIT_NOT_FOUND if they still are."""
    missing = [sha for sha, found in _lookup(repo_dir, list(pinned.values())).items() if not found]
    if not missing:
        return
    note = _fetch(repo_dir)
    still = {sha for sha, found in _lookup(repo_dir, missing).items() if not found}
    if still:
        refs = ", ".join(f"{ref}={sha[:12]}" for ref, sha in pinned.items() if sha in still)
        raise errors.step_error("GIT_COMMIT_NOT_FOUND",
                                f"pinned head(s) {refs} not found in {repo_dir} ({note})")


def forge(repo_path: Path) -> str | None:
    """The https web address of the repository's ``origin`` remote (``untrusted.forge_of``), or None
    when there is no such remote or it names no forge: where links in the model's text may point.

    Read from the repository's configuration in-process; a configuration that rewrites URLs
    (``url.<base>.insteadOf``) is left to ``git remote get-url``, which applies it."""
    try:
        reader = open_repo(repo_path).config_reader()
        remote = str(reader.get_value('remote "origin"', "url"))
        rewrites = any(section.startswith("url ") for section in reader.sections())
    except Exception:  # noqa: BLE001 - no origin, or a configuration GitPython cannot read: ask git
        rewrites, remote = True, ""
    if rewrites:
        try:
            remote = git_log.run(repo_path, ["remote", "get-url", "origin"], timeout_s=10).decode("utf-8", "replace")
        except GitFailure:
            return None
    return untrusted.forge_of(remote)


def _fetch(repo_dir: Path) -> str:
    """Fetch ``origin`` (every remote when there is no origin); say what happened."""
    try:
        remotes = git_log.run(repo_dir, ["remote"]).decode().split()
    except GitFailure as exc:
        return f"cannot list remotes: {exc}"
    if not remotes:
        return "no remote to fetch from"
    targets = ["origin"] if "origin" in remotes else remotes
    for remote in targets:
        try:
            git_log.run(repo_dir, ["fetch", "--quiet", "--no-tags", remote],
                        timeout_s=FETCH_TIMEOUT_S)
        except GitFailure as exc:
            return f"fetch from {remote} failed: {exc}"
    return f"fetched {', '.join(targets)}"
