"""What a weekly report reads from git besides its own commits: last week's commits and the week's merges.

Both are read at COLLECT_GIT from the heads the run pins, so a retry reads the same history:

- ``last_week``: the commits of the ISO week before the report's, as the same attribution
  places them. ``landed``: reachable from the branches as they stood at this week's start and
  from none as they stood a week earlier; otherwise the commits authored that week, reachable
  from this report's heads (one more ``git log`` over one week).
- ``merges``: the first-parent merge commits of the report's coverage (``landed``: the range
  between its heads; otherwise committed during the window), each with the commits it brought
  (reachable from its merged parent and not from its first parent).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from steps import collect_git, git_history, git_log, git_repo
from steps.git_log import CommitInfo, GitFailure
from steps.report_model import Merge

#: Commits a merge's entry lists (its count is always exact).
BROUGHT_KEPT = 50
_FIELDS = "%H%x1f%P%x1f%aN%x1f%ct%x1f%s"


def last_week(repo: Path, branches: list[str], heads: dict[str, str], *, landed: bool, start: datetime,
              end: datetime, authors: Sequence[str], exclude: Sequence[str] | None) -> list[CommitInfo]:
    """The commits of [``start``, ``end``) (the week before the report's) as the attribution places them."""
    if not landed:
        return collect_git.collect(repo, branches, start, end, pinned_heads=heads, authors=authors,
                                   exclude=exclude).commits
    upper = git_history.heads_at(repo, heads, end)
    if not upper:
        return []
    lower = git_history.heads_at(repo, heads, start)
    return collect_git.collect_between(repo, branches, upper, lower, attribution="landed", since=start,
                                       window_start=start, window_end=end, authors=authors, exclude=exclude).commits


def merges(repo: Path, heads: dict[str, str], *, lower: dict[str, str] | None, start: datetime,
           end: datetime) -> list[Merge]:
    """The first-parent merges of the coverage, oldest first: ``lower`` given, those reachable from ``heads``
    and not from ``lower``; else those committed in [``start``, ``end``)."""
    tips = list(dict.fromkeys(heads.values()))
    if not tips:
        return []
    args = ["log", "--first-parent", "--merges", f"--format={_FIELDS}", *tips]
    if lower is not None:
        if lower:
            args += ["--not", *dict.fromkeys(lower.values())]
    else:
        fmt = "%Y-%m-%d %H:%M:%S +0000"
        args += [f"--since={start.astimezone(timezone.utc):{fmt}}", f"--until={end.astimezone(timezone.utc):{fmt}}"]
    try:
        rows = git_log.run(repo, [*args, "--"]).decode("utf-8", "replace").splitlines()
        found = []
        for row in rows:
            sha, parents, author, committed, subject = row.split("\x1f", 4)
            first, *merged = parents.split()
            at = git_log.timestamp(committed)
            if at is None or (lower is None and not start.timestamp() <= at < end.timestamp()):
                continue  # a merge whose date no calendar holds is not listed (its commits are, or are named)
            brought = git_log.run(repo, ["rev-list", "--no-merges", *merged, "--not", first, "--"]).decode().split()
            found.append(Merge(sha=sha, author_name=author, subject=subject, committed_at=git_log.iso_utc(at),
                               brought=len(brought), brought_shas=list(reversed(brought))[:BROUGHT_KEPT]))
    except GitFailure as exc:
        raise git_repo.unreadable_error(repo, exc) from exc
    return sorted(found, key=lambda m: (m.committed_at, m.sha))
