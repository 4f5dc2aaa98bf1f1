"""A repository's branches through time, for a report's range: edges dated from history, fast-forwards, rewrites.

``GitHistory`` is ``steps.coverage``'s ``History`` over git: the heads as they stood at an instant, and whether
one set of heads leads to another. ``excluded_heads``, ``shas_held_later`` and ``heads_at`` answer the other
questions a range asks once history was rewritten, or a weekly asks of last week.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from steps import coverage, git_log, git_range
from steps.git_log import GitFailure
from steps.git_repo import current_heads, directory_of, open_repo, present_or_fetched, unreadable_error


def excluded_heads(repo_path: Path, marks: Sequence[dict[str, str]]) -> list[str]:
    """The fewest commits of ``marks``' heads that reach all of them (what a report's range excludes)."""
    repo_dir = directory_of(repo_path)
    shas = [sha for heads in marks for sha in heads.values()]
    try:
        present = present_or_fetched(repo_dir, shas)
        return git_range.independent(repo_dir, [s for s in shas if s in present])
    except GitFailure as exc:
        raise unreadable_error(repo_dir, exc) from exc


#: A head committed at most this long after the edge it dates is read with its range in one ``git log`` (a run
#: on time); further (a run days late), the first-parent chain is walked on its own first.
NEAR = timedelta(days=1)


class GitHistory:
    """``coverage.History`` over a repository: the branches now, as they stood at an instant, and whether one
    set of heads leads to another.

    A run on time dates its end edge from the branch now, kept a descendant of its start edge: one
    ``git log --numstat NOW --not START`` (merges and parents included) answers that and holds the report's
    range too, which ``collect_between`` then reads from it; one git process for the whole step. Otherwise
    the first-parent chain is read in growing slices (``git_range.dated_chain``), and chains already read
    answer older instants. It remembers which heads it saw lead to which, so that whether a range is a
    fast-forward is rarely asked of git.
    """

    def __init__(self, repo_path: Path, branches: Sequence[str]) -> None:
        self.repo_path, self.branches = repo_path, list(branches)
        handle = open_repo(repo_path)
        self.repo_dir = Path(handle.working_tree_dir or handle.git_dir)
        self.objects_dir = Path(handle.common_dir) / "objects"
        self._leads: set[tuple[str, str]] = set()  # (older, newer): older is newer or one of its ancestors
        self._chains: list[tuple[git_range.Chain, bool]] = []  # first-parent chains read, and whether to the root
        self._now: dict[str, str] = {}
        self._listings: dict[tuple[str, str], git_range.Listing] = {}

    def now(self) -> dict[str, str]:
        self._now = current_heads(self.repo_path, self.branches)
        return dict(self._now)

    def as_of(self, heads: dict[str, str], at: datetime, floor: dict[str, str] | None) -> dict[str, str]:
        before = math.ceil(at.timestamp()) - 1  # a window's edge belongs to the window after it
        try:
            out = {ref: self._one(sha, before, (floor or {}).get(ref), live=self._now.get(ref) == sha)
                   for ref, sha in heads.items()}
        except GitFailure as exc:
            raise unreadable_error(self.repo_dir, exc) from exc
        return {ref: sha for ref, sha in out.items() if sha is not None}

    def _one(self, head: str, before: int, floor: str | None, *, live: bool) -> str | None:
        if live and floor == head:
            return head  # nothing landed since the start edge
        if live and floor is not None:
            found = self._from_listing(head, floor, before)
            if found is not None:
                return found
        try:
            dated, chain = self._dated(head, before)
        except GitFailure as exc:  # a head another node recorded, not fetched here yet
            if not exc.missing_object:
                raise
            present_or_fetched(self.repo_dir, [head])
            dated, chain = self._dated(head, before)
        return self._kept(head, dated, chain, floor)

    def _from_listing(self, head: str, floor: str, before: int) -> str | None:
        """The newest commit of ``head``'s first-parent chain above ``floor`` such that it and every one down to
        ``floor`` were committed by ``before`` (``floor`` when none), from one listing of the range; None when this
        does not apply (the head far newer, ``floor`` not on the chain or not here)."""
        times = git_log.committer_times(self.objects_dir, [head])
        if times is None or times[0] > before + NEAR.total_seconds():
            return None
        try:
            listed = git_range.listing(self.repo_dir, head, floor)
        except GitFailure as exc:
            if exc.missing_object:
                return None
            raise
        chain = listed.first_parents()
        if chain is None:
            return None
        self._listings[(head, floor)] = listed
        kept = floor
        for sha in reversed(chain):  # oldest first
            if listed.graph[sha][0] > before:
                break
            kept = sha
        self._leads.update({(floor, kept), (kept, head), (floor, head)})
        return kept

    def listed(self, upper: dict[str, str], lower: dict[str, str]) -> tuple[git_range.Listing, str] | None:
        """A listing already read that holds the range ``upper --not lower`` of a single branch, and its tip."""
        if len(upper) != 1 or set(upper) != set(lower):
            return None
        tip, floor = next(iter(upper.values())), next(iter(lower.values()))
        found = next((one for (_, f), one in self._listings.items() if f == floor and (tip in one.graph or tip == f)),
                     None)
        return None if found is None else (found, tip)

    def _dated(self, head: str, before: int) -> tuple[str | None, list[str]]:
        """``git_range.dated_chain``, answered from a chain already read when it reaches far enough."""
        for chain, to_root in self._chains:
            at = next((i for i, (sha, _) in enumerate(chain) if sha == head), None)
            if at is not None:
                found = git_range.dated_in(chain[at:], before, exhausted=to_root)
                if found is not git_range.UNSETTLED:
                    return found, [sha for sha, _ in chain[at:]]
        found, read, to_root = git_range.dated_chain(self.repo_dir, head, before)
        self._chains.append((read, to_root))
        return found, [sha for sha, _ in read]

    def _kept(self, head: str, dated: str | None, chain: list[str], floor: str | None) -> str | None:
        """``dated``, or ``floor`` when ``dated`` is older than it and ``floor`` leads to ``head``."""
        if dated is not None:
            self._leads.add((dated, head))
        if floor is None or floor == dated:
            return dated
        if floor in chain:
            self._leads.add((floor, head))
            if dated is not None and chain.index(floor) > chain.index(dated):
                self._leads.add((floor, dated))
                return dated
            return floor  # the branch cannot have stood before a head already recorded earlier
        if dated is not None and self._is_ancestor(floor, dated):
            return dated
        return floor if self._is_ancestor(floor, head) else dated  # else: rewritten since, read as it stands

    def known_to_lead(self, older: str, newer: str) -> bool:
        """Whether this history already saw ``older`` on ``newer``'s chain (no git asked)."""
        return older == newer or (older, newer) in self._leads

    def _is_ancestor(self, older: str, newer: str) -> bool:
        if (older, newer) in self._leads:
            return True
        if older not in present_or_fetched(self.repo_dir, [older]):
            return False
        if git_range.is_ancestor(self.repo_dir, older, newer):
            self._leads.add((older, newer))
            return True
        return False

    def fast_forward(self, lower: dict[str, str], upper: dict[str, str]) -> bool:
        if not set(lower) <= set(upper):
            return False
        pending = {ref: sha for ref, sha in lower.items() if sha != upper[ref] and (sha, upper[ref]) not in self._leads}
        if not pending:
            return True
        try:
            present = present_or_fetched(self.repo_dir, [*pending.values(), *upper.values()])
            if any(sha not in present for sha in upper.values()):
                return False
            return not rewritten(self.repo_dir, pending, upper, present)
        except GitFailure as exc:
            raise unreadable_error(self.repo_dir, exc) from exc


def rewritten(repo_dir: Path, lower: dict[str, str], upper: dict[str, str], present: set[str]) -> list[str]:
    """The branches of both whose ``lower`` head is gone or no longer leads to their ``upper`` head."""
    return sorted(ref for ref, sha in lower.items() if ref in upper and sha != upper[ref] and (
        sha not in present or not git_range.is_ancestor(repo_dir, sha, upper[ref])))


def shas_held_later(repo_path: Path, held: Sequence[coverage.Held]) -> list[str]:
    """The commits that later reports over rewritten ranges hold (``coverage.Plan.later``), sorted."""
    repo_dir = directory_of(repo_path)
    out: set[str] = set()
    try:
        for other in held:
            below = [*other.lower.values(), *(sha for heads in other.earlier for sha in heads.values())]
            present = present_or_fetched(repo_dir, [*other.upper.values(), *below])
            out.update(git_range.range_shas(repo_dir, [s for s in other.upper.values() if s in present],
                                            [s for s in below if s in present]))
    except GitFailure as exc:
        raise unreadable_error(repo_dir, exc) from exc
    return sorted(out)


def heads_at(repo_path: Path, heads: dict[str, str], at: datetime) -> dict[str, str]:
    """The branches whose heads are ``heads`` as they stood just before ``at`` (refs with no commit then left out)."""
    repo_dir = directory_of(repo_path)
    before = math.ceil(at.timestamp()) - 1  # a window's edge belongs to the window after it
    try:
        dated = {ref: git_range.dated_head(repo_dir, sha, before) for ref, sha in heads.items()}
    except GitFailure as exc:
        raise unreadable_error(repo_dir, exc) from exc
    return {ref: sha for ref, sha in dated.items() if sha is not None}
