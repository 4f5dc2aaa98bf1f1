"""The git that coverage needs: the branch as it stood at an instant, and the commits between two sets of heads.

- ``dated_head``: the newest commit of a branch's first-parent chain such that it
  and every first-parent ancestor were committed at or before the instant: the
  branch as it stood then, read from committer dates (a commit cannot be on a
  branch before its ancestors, so one clock-skewed commit cannot pull newer work
  into the past). Read from the head down, in growing slices.
- ``range_shas``: ``git rev-list UPPER… --not LOWER…``, the commits reachable from
  the upper heads and from none of the lower ones (what ``git log A..B`` shows).
- ``is_ancestor``, ``existing``: whether a head still leads to an older one (a
  force-push rewrote it otherwise), and which objects this clone has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from steps import git_log
from steps.git_log import GitFailure

#: When a slice of the first-parent chain holds this many commits older than the instant, and the
#: oldest is a day older, nothing deeper can be newer than the instant but a clock error.
_SETTLED = 32
_DAY_S = 86400


def is_shallow(common_dir: Path) -> bool:
    """Whether the clone is shallow (its history stops at a grafted boundary): git keeps the boundary in a
    non-empty ``shallow`` file of the repository's common directory (what ``rev-parse --is-shallow-repository``
    reads), so no git process is needed."""
    try:
        return (common_dir / "shallow").stat().st_size > 0
    except FileNotFoundError:
        return False


def dated_head(repo_dir: Path, head: str, at_ts: int) -> str | None:
    """The branch whose head is ``head`` as it stood at Unix time ``at_ts``; None if it had no commit then."""
    return dated_chain(repo_dir, head, at_ts)[0]


Chain = list[tuple[str, int]]


def dated_chain(repo_dir: Path, head: str, at_ts: int) -> tuple[str | None, Chain, bool]:
    """``dated_head``, the part of ``head``'s first-parent chain read to find it (newest first, with committer
    times: ``dated_in`` answers again from it for an older instant), and whether that part reaches the root."""
    count = 256
    while True:
        out = git_log.run(repo_dir, ["log", "--first-parent", "--format=%H %ct", f"-n{count}", head])
        chain = [(sha, int(ct)) for sha, ct in (line.split() for line in out.decode().splitlines())]
        exhausted = len(chain) < count
        found = dated_in(chain, at_ts, exhausted=exhausted)
        if found is not UNSETTLED:
            return found, chain, exhausted
        count *= 4


#: ``dated_in``'s answer when the chain read so far is too short to tell.
UNSETTLED = "unsettled"


def dated_in(chain: Chain, at_ts: int, *, exhausted: bool) -> str | None:
    """The newest commit of a first-parent ``chain`` (newest first) that it and all older ones were committed at
    or before ``at_ts``; None when none was; ``UNSETTLED`` when a longer read of the chain could change it."""
    newer = max((i for i, (_, ct) in enumerate(chain) if ct > at_ts), default=-1)
    older = chain[newer + 1:]
    if exhausted or (len(older) >= _SETTLED and older[-1][1] < at_ts - _DAY_S):
        return older[0][0] if older else None
    return UNSETTLED


def range_log(repo_dir: Path, upper: Sequence[str], lower: Sequence[str], *, include_merges: bool,
              unreadable: list[git_log.Unreadable] | None = None) -> list[tuple[int, git_log.RawCommit]]:
    """``(author time, commit)`` of every commit reachable from ``upper`` and from none of ``lower``, with
    its files: one ``git log --numstat UPPER --not LOWER`` (what ``git log A..B`` shows); commits git cannot
    parse are left out, added to ``unreadable``."""
    if not upper:
        return []
    args = ["log", git_log.FORMAT, *git_log.DIFF_OPTIONS, *([] if include_merges else ["--no-merges"]), *upper]
    if lower:
        args += ["--not", *lower]
    return git_log.parse_log(git_log.run(repo_dir, [*args, "--"]), unreadable=unreadable)


@dataclass(frozen=True)
class Listing:
    """Every commit reachable from ``head`` and not from ``floor``, with its files, committer time and parents."""

    head: str
    floor: str
    commits: dict[str, git_log.RawCommit]  # the readable non-merge and merge commits, by SHA
    authored: dict[str, int]
    graph: dict[str, tuple[int, list[str]]]
    unreadable: list[git_log.Unreadable]

    def first_parents(self) -> list[str] | None:
        """``head``'s first-parent chain down to (not including) ``floor``, newest first; None when the chain
        leaves the listing elsewhere (``floor`` is not on it: reached through a merge, or rewritten)."""
        chain, sha = [], self.head
        while sha != self.floor:
            entry = self.graph.get(sha)
            if entry is None or not entry[1]:
                return None
            chain.append(sha)
            sha = entry[1][0]
        return chain

    def reachable(self, tip: str) -> set[str]:
        """The listed commits reachable from ``tip`` (``tip --not floor``, from the listing alone)."""
        seen: set[str] = set()
        todo = [tip] if tip in self.graph else []
        while todo:
            sha = todo.pop()
            if sha in seen:
                continue
            seen.add(sha)
            todo += [p for p in self.graph[sha][1] if p in self.graph and p not in seen]
        return seen


def listing(repo_dir: Path, head: str, floor: str) -> Listing:
    """One ``git log --numstat HEAD --not FLOOR``, merges included, as a ``Listing``."""
    graph: dict[str, tuple[int, list[str]]] = {}
    broken: list[git_log.Unreadable] = []
    out = git_log.run(repo_dir, ["log", git_log.FORMAT_GRAPH, *git_log.DIFF_OPTIONS, head, "--not", floor, "--"])
    found = git_log.parse_log(out, unreadable=broken, graph=graph)
    return Listing(head, floor, {c["sha"]: c for _, c in found}, {c["sha"]: at for at, c in found}, graph, broken)


def range_shas(repo_dir: Path, upper: Sequence[str], lower: Sequence[str]) -> list[str]:
    """``git rev-list UPPER… --not LOWER…``: the commits reachable from ``upper`` and from none of ``lower``."""
    if not upper:
        return []
    args = ["rev-list", *upper, *(["--not", *lower] if lower else [])]
    return git_log.run(repo_dir, [*args, "--"]).decode().split()


def independent(repo_dir: Path, shas: Sequence[str]) -> list[str]:
    """The fewest of ``shas`` from which every one of them is reachable (``git merge-base --independent``)."""
    unique = sorted(set(shas))
    if len(unique) <= 1:
        return unique
    return git_log.run(repo_dir, ["merge-base", "--independent", *unique]).decode().split()


def is_ancestor(repo_dir: Path, older: str, newer: str) -> bool:
    """Whether ``older`` is ``newer`` or one of its ancestors."""
    try:
        git_log.run(repo_dir, ["merge-base", "--is-ancestor", older, newer])
    except GitFailure as exc:
        if exc.returncode == 1:
            return False
        raise
    return True


def existing(repo_dir: Path, shas: Sequence[str]) -> set[str]:
    """The commits of ``shas`` present in this clone."""
    if not shas:
        return set()
    out = git_log.run(repo_dir, ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
                      stdin="".join(f"{s}\n" for s in shas).encode())
    return {fields[0] for fields in (line.split() for line in out.decode().splitlines())
            if len(fields) == 2 and fields[1] == "commit"}
