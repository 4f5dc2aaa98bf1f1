"""Work in progress: what branches that are not tracked hold that the tracked branches do not, yet.

Read at COLLECT_GIT (layout 5, a project's ``wip_branches`` globs): every local and remote-tracking branch whose
short name matches a glob, but the tracked branches (and their remote twins, ``origin/main``) and symbolic
``…/HEAD``; of each, the commits not reachable from the report's pinned heads and committed before the window's
end. A branch is listed when one of those commits was authored or committed in the report's window. Listed apart, never counted: its commits land
once, in the report of the period in which they reach a tracked branch, as any other commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from fnmatch import fnmatchcase
from pathlib import Path

from steps import git_log, git_repo
from steps.git_log import GitFailure
from steps.report_model import InProgress

#: Branches looked at, and commits read of each: a report lists work in progress, not a repository's archive.
BRANCHES_READ = 50
COMMITS_READ = 500
#: SHAs an entry keeps (newest first).
SHAS_KEPT = 5


def in_progress(repo: Path, heads: dict[str, str], tracked: Sequence[str], patterns: Sequence[str], *,
                start: datetime, end: datetime) -> list[InProgress]:
    """The branches with work not on ``heads`` yet, authored or updated in [``start``, ``end``): newest first."""
    if not patterns or not heads:
        return []
    names = set(tracked)
    tips = set(heads.values())
    try:
        refs = git_log.run(repo, ["for-each-ref", "--format=%(refname:short)%1f%(objectname)%1f%(symref)",
                                  "refs/heads", "refs/remotes"]).decode("utf-8", "replace").splitlines()
        candidates: dict[str, str] = {}  # tip -> the first name it goes by (local before remote)
        for row in refs:
            name, tip, symref = row.split("\x1f")
            remote_twin = "/" in name and name.split("/", 1)[1] in names
            if symref or name in names or remote_twin or tip in tips:
                continue
            if any(fnmatchcase(name, pattern) for pattern in patterns):
                candidates.setdefault(tip, name)
        found = []
        for tip, name in list(candidates.items())[:BRANCHES_READ]:
            rows = git_log.run(repo, ["log", "--no-merges", f"-n{COMMITS_READ}", "--format=%H%x1f%aN%x1f%at%x1f%ct",
                                      tip, "--not", *sorted(tips), "--"]).decode("utf-8", "replace").splitlines()
            # What the branch held by the window's end: a report written later says what was in progress then.
            commits = [c for c in (row.split("\x1f") for row in rows if row) if c[3].isdigit() and int(c[3]) < end.timestamp()]
            window = (start.timestamp(), end.timestamp())
            touched = [c for c in commits if any(window[0] <= int(t) < window[1] for t in c[2:4] if t.isdigit())]
            if not touched:
                continue
            newest = max(int(c[3]) for c in commits)
            found.append(InProgress(branch=name, authors=sorted({c[1] for c in commits}), commits=len(commits),
                                    last_update=git_log.iso_utc(newest), shas=[c[0] for c in commits[:SHAS_KEPT]]))
    except GitFailure as exc:
        raise git_repo.unreadable_error(repo, exc) from exc
    return sorted(found, key=lambda w: (w.last_update, w.branch), reverse=True)
