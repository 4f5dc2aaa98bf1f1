"""COLLECT_GIT: the commits of a business window, read from a local repository.

Contract (SPEC §6, §11, §13):

- Heads: pinned SHAs are used exactly as given (when one is missing locally
  the remote is fetched once, else ``GIT_COMMIT_NOT_FOUND``, retryable so
  another node can take the run); without pins every branch is resolved now.
- Commits: reachable from the heads, **author date** in ``[window_start,
  window_end)``, merges excluded unless asked (a merge carries no files: its
  changes are counted on the commits it brings in), optional author filter on
  the ``.mailmap``-resolved name or email (case-insensitive, exact), each with
  its files and line counts. Sorted by author date, then SHA; one entry per SHA
  however many heads reach it.
- Walk bounds: git only looks at commits whose committer date is at least
  ``window_start - slack`` (default 1 hour, for committer clocks behind author
  clocks). There is no upper bound by default: a commit re-committed (rebased,
  amended, cherry-picked) long after its author date still belongs to its
  window. ``late`` can bound the walk for speed, at that price.
- Cost grows with the commits in and after the window, never with older
  history. Near the heads (the daily run) one ``git log --numstat`` does
  everything; deeper in history a cheap listing picks the window's commits
  and only those are diffed (``steps.git_log``).

- Excluded files: with ``exclude`` given (a list, maybe empty), a file is
  marked ``excluded`` when ``.gitattributes`` at ``head_sha`` sets
  ``linguist-generated`` or ``linguist-vendored`` on it, or when one of the
  ``exclude`` globs matches it (``exclude_matches``). Marked files stay in the
  output; the report leaves them out of its statistics. ``exclude=None``
  (runs pinned before exclusion existed) marks nothing.

- Unreadable commits: a commit git cannot parse (a NUL in its author header,
  ``git fsck``'s ``nulInHeader``; a date that is no number) is left out with a
  warning naming its SHA, and listed in ``unreadable`` when its committer time
  (if git could read that) lies in the window, so the report can say so. It
  never fails the step: one corrupt object must not block a project's reports.

Errors: ``GIT_REPO_NOT_FOUND`` (no repository at the path, or git cannot read
it), ``CONFIG_INVALID`` (a configured branch that names no commit, a bad
window), ``GIT_COMMIT_NOT_FOUND`` (a pinned SHA absent even after a fetch).
"""

from __future__ import annotations

import fnmatch
import logging
import math
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal

import git
from pydantic import BaseModel

from engine.core import errors, logs
from steps import coverage, git_log, git_range, untrusted
from steps.git_log import CommitInfo, FileChange, GitFailure
from steps.report_model import InProgress, LastWeek, Merge

__all__ = ["CollectOutput", "CommitInfo", "FileChange", "WalkBounds", "collect", "collect_between", "current_heads",
           "forge", "heads_at"]


FETCH_TIMEOUT_S = 120.0
log = logging.getLogger(__name__)

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
# Where a branch name is looked up in-process, branches first; anything else (tags,
# which may need peeling, or expressions) is resolved by git itself.
_DWIM = ("refs/heads/{}", "refs/remotes/{}", "refs/remotes/{}/HEAD")
#: What GitHub Linguist (and so most forges) leave out of a repository's statistics.
LINGUIST_ATTRIBUTES = ("linguist-generated", "linguist-vendored")


_HANDLES_KEPT = 32
_HANDLES: dict[str, git.Repo] = {}
_HANDLES_LOCK = threading.Lock()


@dataclass(frozen=True)
class WalkBounds:
    """How far git walks around the window, and when one pass is cheaper than two.

    ``near``: heads committed at most this long after the window end are
    collected in a single diffing pass; ``abort_after`` bounds the newer
    commits that pass may diff before it gives way to the two-pass strategy.
    """

    slack: timedelta = timedelta(hours=1)
    late: timedelta | None = None
    near: timedelta = timedelta(hours=6)
    abort_after: int = 64


@dataclass(frozen=True)
class Repo:
    path: Path
    objects_dir: Path


Attribution = Literal["landed", "authored"]


class CollectOutput(BaseModel):
    """COLLECT_GIT's persisted output; ``heads`` is what the run pins.

    The coverage fields are set for runs pinned with an attribution (``collect_between``):
    ``since`` and ``until`` are where this report's coverage starts (the previous report's end) and ends,
    ``since_heads`` the heads it starts from; ``also_covers`` names earlier periods that
    will have no report of their own and are held here; ``covered``: another report's span
    already holds this window's commits (``covered_by`` names it); ``arrived_late`` (``authored``): commits authored
    before ``since`` that arrived since the previous report; ``rewritten``: branches
    whose history was rewritten (force-pushed) since the previous report.
    """

    heads: dict[str, str]
    head_sha: str
    commits: list[CommitInfo]
    window_start: str
    window_end: str
    attribution: Attribution | None = None
    since: str | None = None
    until: str | None = None
    since_heads: dict[str, str] | None = None
    also_covers: list[str] = []
    covered: bool = False
    #: The report whose span holds this window when ``covered`` ("": one an older release recorded, unnamed).
    covered_by: str | None = None
    arrived_late: list[CommitInfo] = []
    rewritten: list[str] = []
    #: SHAs of the window's commits git could not read (left out; the report says so).
    unreadable: list[str] = []
    #: A weekly's previous week and merges (layout 3, ``steps.week_git``); None when not gathered.
    last_week: LastWeek | None = None
    merges: list[Merge] | None = None
    #: Work on branches not merged yet (layout 5, ``steps.wip_git``); None when not gathered.
    in_progress: list[InProgress] | None = None


def collect(repo_path: Path, branches: list[str], window_start: datetime, window_end: datetime,
            *, pinned_heads: dict[str, str] | None = None, authors: Sequence[str] = (),
            include_merges: bool = False, bounds: WalkBounds = WalkBounds(),
            exclude: Sequence[str] | None = None) -> CollectOutput:
    """Collect the window's commits from ``repo_path`` (see the module contract).

    ``window_start``/``window_end`` must be timezone-aware. ``pinned_heads``
    (``{ref: sha}``) replaces branch resolution entirely; ``head_sha`` is the
    head of ``branches[0]`` when present, else the first head.
    """
    start, end = _check_window(window_start, window_end)
    handle = _open_repo(repo_path)
    repo = Repo(Path(handle.working_tree_dir or handle.git_dir), Path(handle.common_dir) / "objects")
    if pinned_heads:
        heads = _check_pinned(pinned_heads)
    else:
        heads = _resolve_branches(handle, repo.path, branches)
    first = branches[0] if branches and branches[0] in heads else next(iter(heads))
    wanted = frozenset(a.strip().casefold() for a in authors if a.strip())
    tips = list(dict.fromkeys(heads.values()))
    try:
        commits, unreadable = _commits(repo, tips, start, end, wanted, include_merges, bounds)
    except GitFailure as exc:
        if not (pinned_heads and exc.missing_object):
            raise unreadable_error(repo.path, exc) from exc
        _fetch_missing(repo.path, heads)
        try:
            commits, unreadable = _commits(repo, tips, start, end, wanted, include_merges, bounds)
        except GitFailure as again:
            raise unreadable_error(repo.path, again) from again
    if exclude is not None:
        try:
            _mark_excluded(repo.path, heads[first], commits, exclude)
        except GitFailure as exc:
            raise unreadable_error(repo.path, exc) from exc
    return CollectOutput.model_validate({
        "heads": heads, "head_sha": heads[first], "commits": commits,
        "window_start": _iso(start), "window_end": _iso(end), "unreadable": unreadable})


def _commits(repo: Repo, tips: list[str], start: datetime, end: datetime,
             wanted: frozenset[str], include_merges: bool,
             bounds: WalkBounds) -> tuple[list[git_log.RawCommit], list[str]]:
    """The window's commits as dicts, sorted, and the SHAs of those git could not read
    (see the module contract); raises ``GitFailure``."""
    lo, hi = start.timestamp(), end.timestamp()
    since = start - bounds.slack
    until = None if bounds.late is None else end + bounds.late

    def keep(at: int, name: str, email: str) -> bool:
        return lo <= at < hi and (not wanted or bool(wanted & {name.casefold(), email.casefold()}))

    found: list[tuple[int, git_log.RawCommit]] | None = None
    broken: list[git_log.Unreadable] = []
    times = git_log.committer_times(repo.objects_dir, tips)
    if times is None or max(times) <= hi + bounds.near.total_seconds():
        found = git_log.window_log(repo.path, tips, since, until, int(hi), keep=keep,
                                   include_merges=include_merges, abort_after=bounds.abort_after,
                                   unreadable=broken)
    if found is None:
        broken.clear()  # the abandoned pass's finds are the walk's too
        walked = git_log.walk(repo.path, tips, since, until, lo=math.ceil(lo), hi=math.ceil(hi),
                              include_merges=include_merges, with_idents=bool(wanted), unreadable=broken)
        chosen = sorted(sha for _, sha, ident in walked if not wanted or wanted & ident)
        found = git_log.details(repo.path, chosen) if chosen else []
        if len(found) != len(chosen):
            raise GitFailure(["log"], 0, f"returned {len(found)} of {len(chosen)} commits")
    kept = [(at, c) for at, c in found if keep(at, c["author_name"], c["author_email"])]
    kept.sort(key=lambda pair: (pair[0], pair[1]["sha"]))
    return [c for _, c in kept], _left_out(repo.path, broken, lo, hi)


def _left_out(repo_dir: Path, broken: Sequence[git_log.Unreadable], lo: float, hi: float) -> list[str]:
    """The unreadable commits this window reports: committed inside it, or at a time git cannot read
    either; each logged once with its SHA."""
    shas = sorted({b.sha for b in broken if b.committed_at is None or lo <= b.committed_at < hi})
    for sha in shas:
        logs.event(log, logging.WARNING, "commit_unreadable", repo=str(repo_dir), sha=sha,
                   effect="left out of the report (git cannot parse it; see git fsck)")
    return shas



def current_heads(repo_path: Path, branches: list[str]) -> dict[str, str]:
    """Each configured branch's head now; GIT_REPO_SHALLOW for a shallow clone (its history is cut)."""
    handle = _open_repo(repo_path)
    repo_dir = Path(handle.working_tree_dir or handle.git_dir)
    if git_range.is_shallow(Path(handle.common_dir)):
        raise errors.step_error("GIT_REPO_SHALLOW", f"{repo_dir} is a shallow clone: its history stops short, so "
                                "what a report holds cannot be told; run `git fetch --unshallow` there")
    return _resolve_branches(handle, repo_dir, branches)


def excluded_heads(repo_path: Path, marks: Sequence[dict[str, str]]) -> list[str]:
    """The fewest commits of ``marks``' heads that reach all of them (what a report's range excludes)."""
    repo_dir = _repo_dir(repo_path)
    shas = [sha for heads in marks for sha in heads.values()]
    try:
        present = _present_or_fetched(repo_dir, shas)
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
        handle = _open_repo(repo_path)
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
            _present_or_fetched(self.repo_dir, [head])
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
        if older not in _present_or_fetched(self.repo_dir, [older]):
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
            present = _present_or_fetched(self.repo_dir, [*pending.values(), *upper.values()])
            if any(sha not in present for sha in upper.values()):
                return False
            return not _rewritten(self.repo_dir, pending, upper, present)
        except GitFailure as exc:
            raise unreadable_error(self.repo_dir, exc) from exc


def _rewritten(repo_dir: Path, lower: dict[str, str], upper: dict[str, str], present: set[str]) -> list[str]:
    """The branches of both whose ``lower`` head is gone or no longer leads to their ``upper`` head."""
    return sorted(ref for ref, sha in lower.items() if ref in upper and sha != upper[ref] and (
        sha not in present or not git_range.is_ancestor(repo_dir, sha, upper[ref])))


def shas_held_later(repo_path: Path, held: Sequence[coverage.Held]) -> list[str]:
    """The commits that later reports over rewritten ranges hold (``coverage.Plan.later``), sorted."""
    repo_dir = _repo_dir(repo_path)
    out: set[str] = set()
    try:
        for other in held:
            below = [*other.lower.values(), *(sha for heads in other.earlier for sha in heads.values())]
            present = _present_or_fetched(repo_dir, [*other.upper.values(), *below])
            out.update(git_range.range_shas(repo_dir, [s for s in other.upper.values() if s in present],
                                            [s for s in below if s in present]))
    except GitFailure as exc:
        raise unreadable_error(repo_dir, exc) from exc
    return sorted(out)


def heads_at(repo_path: Path, heads: dict[str, str], at: datetime) -> dict[str, str]:
    """The branches whose heads are ``heads`` as they stood just before ``at`` (refs with no commit then left out)."""
    repo_dir = _repo_dir(repo_path)
    before = math.ceil(at.timestamp()) - 1  # a window's edge belongs to the window after it
    try:
        dated = {ref: git_range.dated_head(repo_dir, sha, before) for ref, sha in heads.items()}
    except GitFailure as exc:
        raise unreadable_error(repo_dir, exc) from exc
    return {ref: sha for ref, sha in dated.items() if sha is not None}


def collect_between(repo_path: Path, branches: list[str], upper: dict[str, str], lower: dict[str, str], *,
                    attribution: Attribution, since: datetime, window_start: datetime, window_end: datetime,
                    until: datetime | None = None, covered_by: str | None = None, also_covers: Sequence[str] = (),
                    excluded: Sequence[str] = (), held_later: Sequence[str] = (), authors: Sequence[str] = (),
                    include_merges: bool = False, exclude: Sequence[str] | None = None,
                    history: GitHistory | None = None) -> CollectOutput:
    """The commits of a report whose range runs from the heads ``lower`` to the heads ``upper``.

    ``landed``: every commit reachable from ``upper`` and from none of ``lower`` nor ``excluded``
    (the heads of earlier marks, so that a commit force-pushed away and back is not held twice), and
    none of ``held_later`` (what later reports over a rewritten range hold: ``coverage.Plan.later``).
    ``authored``: commits reachable from ``upper`` whose author date is in
    [``since``, ``until``) (``until``: the window's end unless the report reaches a
    later mark), and apart (``arrived_late``) those of the range
    authored before ``since``. ``covered_by``: another report's span holds the window (its business key; "" when
    an old mark does not say which): none.
    The author filter applies after attribution. A head missing here is fetched
    once (another node may have recorded it); a lower head still missing, or one
    that no longer leads to the upper head, means the branch was rewritten (``history``: the one that
    decided the range, which may already know).
    """
    start, end = _check_window(window_start, window_end)
    covered = covered_by is not None
    since_utc = since.astimezone(timezone.utc)
    until_utc = end if until is None else until.astimezone(timezone.utc)
    handle = _open_repo(repo_path)
    repo = Repo(Path(handle.working_tree_dir or handle.git_dir), Path(handle.common_dir) / "objects")
    upper, lower = _check_pinned(upper), _check_pinned(lower)
    # No head at all: no branch had a commit yet at the report's end, so it holds nothing.
    first = branches[0] if branches and branches[0] in upper else next(iter(upper), None)
    wanted = frozenset(a.strip().casefold() for a in authors if a.strip())
    broken: list[git_log.Unreadable] = []
    unreadable: list[str] = []
    listed = history.listed(upper, lower) if history is not None and not excluded and not held_later else None
    try:
        try:  # the common case costs one git log; a head missing here is fetched once, then looked for
            if listed is not None:  # a run on time: its range was read with its end edge
                ranged = [] if covered else _from_listing(*listed, wanted, include_merges, broken)
            else:
                ranged = [] if covered or not upper else _ranged(repo.path, upper, lower, excluded, wanted,
                                                                       include_merges, present=None, broken=broken)
            present = set([*upper.values(), *lower.values(), *excluded])
        except GitFailure as exc:
            if not exc.missing_object:
                raise
            present = _present_or_fetched(repo.path, [*upper.values(), *lower.values(), *excluded])
            ranged = None
        missing_upper = [f"{ref}={sha[:12]}" for ref, sha in upper.items() if sha not in present]
        if missing_upper:
            raise errors.step_error("GIT_COMMIT_NOT_FOUND",
                                    f"head(s) {', '.join(missing_upper)} not found in {repo.path} after a fetch")
        unknown = {ref: sha for ref, sha in lower.items()
                   if history is None or ref not in upper or not history.known_to_lead(sha, upper[ref])}
        rewritten = _rewritten(repo.path, unknown, upper, present)
        commits: list[git_log.RawCommit] = []
        late: list[git_log.RawCommit] = []
        if not covered and upper:
            if ranged is None:
                ranged = _ranged(repo.path, upper, lower, excluded, wanted, include_merges, present=present,
                                 broken=broken)
            unreadable = _left_out(repo.path, broken, float("-inf"), float("inf"))
            gone = frozenset(held_later)
            ranged = [c for c in ranged if c["sha"] not in gone]
            if attribution == "landed":
                commits = ranged
            else:
                commits, by_date = _commits(repo, list(dict.fromkeys(upper.values())), since_utc, until_utc, wanted,
                                            include_merges, WalkBounds())
                commits = [c for c in commits if c["sha"] not in gone]
                unreadable = sorted({*unreadable, *by_date})
                late = [c for c in ranged if c["authored_at"] < _iso(since_utc)]
        if exclude is not None and first is not None:
            _mark_excluded(repo.path, upper[first], [*commits, *late], exclude)
    except GitFailure as exc:
        raise unreadable_error(repo.path, exc) from exc
    return CollectOutput.model_validate({
        "heads": upper, "head_sha": upper[first] if first else "", "commits": commits, "window_start": _iso(start),
        "window_end": _iso(end), "attribution": attribution, "since": _iso(since_utc), "until": _iso(until_utc), "since_heads": lower,
        "also_covers": list(also_covers), "covered": covered, "covered_by": covered_by, "arrived_late": late, "rewritten": rewritten,
        "unreadable": unreadable})


def _ranged(repo_dir: Path, upper: dict[str, str], lower: dict[str, str], excluded: Sequence[str],
            wanted: frozenset[str], include_merges: bool, *, present: set[str] | None,
            broken: list[git_log.Unreadable]) -> list[git_log.RawCommit]:
    """The range's commits by author time (lower heads absent here left out of the exclusion); those git
    cannot read go to ``broken``."""
    negatives = [s for s in dict.fromkeys([*lower.values(), *excluded]) if present is None or s in present]
    broken.clear()
    found = git_range.range_log(repo_dir, list(dict.fromkeys(upper.values())), negatives,
                                include_merges=include_merges, unreadable=broken)
    return _by_author_time(found, wanted)


def _from_listing(listed: git_range.Listing, tip: str, wanted: frozenset[str], include_merges: bool,
                  broken: list[git_log.Unreadable]) -> list[git_log.RawCommit]:
    """``_ranged`` read from a listing of a wider range: the commits of it reachable from ``tip``."""
    held = listed.reachable(tip)
    broken[:] = [u for u in listed.unreadable if u.sha in held]
    found = [(listed.authored[sha], listed.commits[sha]) for sha in held if sha in listed.commits
             and (include_merges or len(listed.graph[sha][1]) <= 1)]
    return _by_author_time(found, wanted)


def _by_author_time(found: list[tuple[int, git_log.RawCommit]], wanted: frozenset[str]) -> list[git_log.RawCommit]:
    kept = [(at, c) for at, c in found
            if not wanted or wanted & {c["author_name"].casefold(), c["author_email"].casefold()}]
    kept.sort(key=lambda pair: (pair[0], pair[1]["sha"]))
    return [c for _, c in kept]


def _repo_dir(repo_path: Path) -> Path:
    handle = _open_repo(repo_path)
    return Path(handle.working_tree_dir or handle.git_dir)


def _present_or_fetched(repo_dir: Path, shas: Sequence[str]) -> set[str]:
    """The commits of ``shas`` present here, after one fetch if some were missing."""
    wanted = list(dict.fromkeys(shas))
    present = git_range.existing(repo_dir, wanted)
    if len(present) < len(wanted):
        _fetch(repo_dir)
        present = git_range.existing(repo_dir, wanted)
    return present

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


def _mark_excluded(repo_dir: Path, head: str, commits: list[git_log.RawCommit], globs: Sequence[str]) -> None:
    """Set ``excluded`` on the files marked generated/vendored at ``head`` or matched by ``globs``."""
    paths = sorted({f["path"] for c in commits for f in c["files"]})
    handle = _open_repo(repo_dir)
    marked = git_log.attribute_set(repo_dir, head, paths, LINGUIST_ATTRIBUTES) if paths and git_log.attributes_may_apply(
        repo_dir, Path(handle.common_dir), head, paths) else set()
    marked.update(p for p in paths if exclude_matches(p, globs))
    for commit in commits:
        for change in commit["files"]:
            if change["path"] in marked:
                change["excluded"] = True


def _check_window(window_start: datetime, window_end: datetime) -> tuple[datetime, datetime]:
    if window_start.tzinfo is None or window_end.tzinfo is None:
        raise errors.step_error("CONFIG_INVALID", "collect window must be timezone-aware")
    if window_end <= window_start:
        raise errors.step_error("CONFIG_INVALID",
                                f"collect window is empty: {window_start} >= {window_end}")
    return window_start.astimezone(timezone.utc), window_end.astimezone(timezone.utc)


def _iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _open_repo(repo_path: Path) -> git.Repo:
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


def _resolve_branches(repo: git.Repo, repo_dir: Path, branches: Sequence[str]) -> dict[str, str]:
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


def _check_pinned(pinned: dict[str, str]) -> dict[str, str]:
    for ref, sha in pinned.items():
        if not isinstance(sha, str) or not _SHA.match(sha):
            raise errors.step_error("CONFIG_INVALID",
                                    f"pinned head {ref!r} is not a full SHA: {sha!r}")
    return dict(pinned)


def _fetch_missing(repo_dir: Path, pinned: dict[str, str]) -> None:
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
        reader = _open_repo(repo_path).config_reader()
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
