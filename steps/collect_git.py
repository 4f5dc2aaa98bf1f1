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
  ``exclude`` globs matches it (``steps.excluded_files``). Marked files stay in the
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

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from engine.core import errors, logs
from steps import excluded_files, git_history, git_log, git_range, git_repo
from steps.forge_model import ForgeView
from steps.git_log import CommitInfo, GitFailure
from steps.report_model import InProgress, LastWeek, Merge

__all__ = ["CollectOutput", "WalkBounds", "collect", "collect_between"]


log = logging.getLogger(__name__)


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
    #: What the forge says of the range (layout 6, ``steps.forge_view``); None when not gathered. Kept here so a
    #: retry of the later steps shows the same titles and reviewers.
    forge_view: ForgeView | None = None


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
    handle = git_repo.open_repo(repo_path)
    repo = Repo(Path(handle.working_tree_dir or handle.git_dir), Path(handle.common_dir) / "objects")
    if pinned_heads:
        heads = git_repo.check_pinned(pinned_heads)
    else:
        heads = git_repo.resolve_branches(handle, repo.path, branches)
    first = branches[0] if branches and branches[0] in heads else next(iter(heads))
    wanted = frozenset(a.strip().casefold() for a in authors if a.strip())
    tips = list(dict.fromkeys(heads.values()))
    try:
        commits, unreadable = _commits(repo, tips, start, end, wanted, include_merges, bounds)
    except GitFailure as exc:
        if not (pinned_heads and exc.missing_object):
            raise git_repo.unreadable_error(repo.path, exc) from exc
        git_repo.fetch_missing(repo.path, heads)
        try:
            commits, unreadable = _commits(repo, tips, start, end, wanted, include_merges, bounds)
        except GitFailure as again:
            raise git_repo.unreadable_error(repo.path, again) from again
    if exclude is not None:
        try:
            excluded_files.mark_excluded(repo.path, heads[first], commits, exclude)
        except GitFailure as exc:
            raise git_repo.unreadable_error(repo.path, exc) from exc
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


def collect_between(repo_path: Path, branches: list[str], upper: dict[str, str], lower: dict[str, str], *,
                    attribution: Attribution, since: datetime, window_start: datetime, window_end: datetime,
                    until: datetime | None = None, covered_by: str | None = None, also_covers: Sequence[str] = (),
                    excluded: Sequence[str] = (), held_later: Sequence[str] = (), authors: Sequence[str] = (),
                    include_merges: bool = False, exclude: Sequence[str] | None = None,
                    history: git_history.GitHistory | None = None) -> CollectOutput:
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
    handle = git_repo.open_repo(repo_path)
    repo = Repo(Path(handle.working_tree_dir or handle.git_dir), Path(handle.common_dir) / "objects")
    upper, lower = git_repo.check_pinned(upper), git_repo.check_pinned(lower)
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
            present = git_repo.present_or_fetched(repo.path, [*upper.values(), *lower.values(), *excluded])
            ranged = None
        missing_upper = [f"{ref}={sha[:12]}" for ref, sha in upper.items() if sha not in present]
        if missing_upper:
            raise errors.step_error("GIT_COMMIT_NOT_FOUND",
                                    f"head(s) {', '.join(missing_upper)} not found in {repo.path} after a fetch")
        unknown = {ref: sha for ref, sha in lower.items()
                   if history is None or ref not in upper or not history.known_to_lead(sha, upper[ref])}
        rewritten = git_history.rewritten(repo.path, unknown, upper, present)
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
            excluded_files.mark_excluded(repo.path, upper[first], [*commits, *late], exclude)
    except GitFailure as exc:
        raise git_repo.unreadable_error(repo.path, exc) from exc
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


def _check_window(window_start: datetime, window_end: datetime) -> tuple[datetime, datetime]:
    if window_start.tzinfo is None or window_end.tzinfo is None:
        raise errors.step_error("CONFIG_INVALID", "collect window must be timezone-aware")
    if window_end <= window_start:
        raise errors.step_error("CONFIG_INVALID",
                                f"collect window is empty: {window_start} >= {window_end}")
    return window_start.astimezone(timezone.utc), window_end.astimezone(timezone.utc)


def _iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
