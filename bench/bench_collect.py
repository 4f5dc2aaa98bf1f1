"""COLLECT_GIT on a 20,000-commit repository vs plain ``git log --numstat``, same windows.

The repository comes from ``tests.fakes.gitrepo.build_large_repo`` (linear ``main``,
50 commits a day from 2025-01-01, 1-3 files changed per commit; no commit-graph
file, like a fresh clone before ``git gc``). Windows: one day and one week, at the
tip of history ("recent") and in its middle ("mid-history").

Per repetition, side by side: ``steps.collect_git.collect`` (open the repository,
resolve ``main``, the git subprocess(es), parsing, pydantic validation) and
``git log --numstat --no-merges --since=S --until=E main`` with its output read
through a pipe. Target (SPEC §11): collect ≤ 1.2× git log (2× at the very most).
"""

from __future__ import annotations

import subprocess
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import _common as c

from steps.collect_git import collect
from tests.fakes.gitrepo import build_large_repo, git_env

FMT = "%Y-%m-%d %H:%M:%S +0000"


def git_log(repo: Path, start: datetime, end: datetime) -> int:
    """The baseline: ``git log --numstat --no-merges --since --until``; returns commits printed."""
    out = subprocess.run(["git", "log", "--numstat", "--no-merges", f"--since={start:{FMT}}",
                          f"--until={end:{FMT}}", "main"], cwd=repo, env=git_env(), capture_output=True,
                         check=True).stdout
    return out.count(b"\ncommit ") + out.startswith(b"commit ")


def windows(first: datetime, commits: int, per_day: int) -> dict[str, tuple[datetime, datetime]]:
    days = commits // per_day
    last_day = first + timedelta(days=days - 1)
    middle = first + timedelta(days=days // 2)
    return {
        "recent day": (last_day, last_day + timedelta(days=1)),
        "recent week": (last_day - timedelta(days=6), last_day + timedelta(days=1)),
        "mid-history day": (middle, middle + timedelta(days=1)),
        "mid-history week": (middle, middle + timedelta(days=7)),
    }


def main() -> None:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--commits", type=int, default=20_000)
    args = p.parse_args()
    reps = c.check_reps(args.reps)
    c.announce("bench_collect.py")
    rows, payload = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-collect-") as tmp:
        build_s, large = c.timed(lambda: build_large_repo(Path(tmp), commits=args.commits))
        repo = large.repo.path
        print(f"built a {args.commits:,}-commit repository in {build_s:.1f} s (not timed)", flush=True)
        for label, (start, end) in windows(large.first_at, args.commits, 50).items():
            collect(repo, ["main"], start, end)  # warm-up: page cache, imports
            git_log(repo, start, end)
            ours, theirs, ratio = [], [], []
            found = printed = 0
            for _ in range(reps):
                seconds, output = c.timed(lambda s=start, e=end: collect(repo, ["main"], s, e))
                found = len(output.commits)
                baseline, printed = c.timed(lambda s=start, e=end: git_log(repo, s, e))
                ours.append(seconds)
                theirs.append(baseline)
                ratio.append(seconds / baseline)
            rows.append([label, f"{found:,} / {printed:,}", c.fmt(min(ours), "ms"),
                         c.fmt(sorted(ours)[reps // 2], "ms"), c.fmt(min(theirs), "ms"),
                         c.fmt(sorted(theirs)[reps // 2], "ms"), c.fmt(min(ratio), "x"),
                         c.fmt(sorted(ratio)[reps // 2], "x")])
            payload[label] = {"collect_s": ours, "git_log_s": theirs, "ratio": ratio,
                              "commits": found, "git_log_commits": printed}
            print(f"{label}: collect {sorted(ours)[reps // 2] * 1000:.1f} ms, git log "
                  f"{sorted(theirs)[reps // 2] * 1000:.1f} ms, ratio {sorted(ratio)[reps // 2]:.2f}×", flush=True)
    print()
    print(c.table(["window", "commits (collect / git log)", "collect min", "collect median", "git log min",
                   "git log median", "ratio min", "ratio median"], rows))
    print("\nratio = collect ÷ git log in the same repetition; target ≤ 1.2× (2× at the very most)")
    c.save("bench_collect", payload)


if __name__ == "__main__":
    main()
