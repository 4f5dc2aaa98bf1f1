"""What placing a report by landing costs in git: COLLECT_GIT's coverage work against a bare ``git log --numstat``.

On the 20,000-commit repository of ``bench_collect`` (``tests.fakes.gitrepo.build_large_repo``), two cases:

- **recent day, on time**: the previous report's end is recorded; the run reads the branch now, dates its end
  edge, checks it is a fast-forward and collects the range (``git_history.GitHistory`` + ``collect_between``,
  and, for "the whole step", with the generated/vendored files marked and the forge looked up: everything
  COLLECT_GIT asks of git);
- **mid-history day, backfill**: no edge recorded around it, a later mark exists: both edges are dated from
  that mark's chain (the reconstruction a backfill does), then the range is collected.

Each repetition runs the engine's work in a fresh Python process (imports done before the clock starts: a
cold GitPython handle, no cache of ours), and ``git log --numstat --no-merges UPPER --not LOWER`` in its own
process; the order alternates. Printed: the best of each and the median of the per-repetition ratios.

Usage: ``.venv/bin/python bench/bench_placement.py [--reps 7]``
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import _common as c

from tests.fakes.gitrepo import build_large_repo, git_env

CHILD = r"""
import json, sys, time
from datetime import datetime
from pathlib import Path
from steps import collect_git, git_history, git_repo
repo, start, end, floor, after = sys.argv[1], datetime.fromisoformat(sys.argv[2]), datetime.fromisoformat(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
whole = sys.argv[6] == "whole"
began = time.perf_counter()
history = git_history.GitHistory(Path(repo), ["main"])
if floor:  # on time: the lower edge is recorded; the upper one is read from the branch now
    lower = floor
    upper = history.as_of(history.now(), end, lower)
else:  # a backfill: both edges dated from the later mark's chain
    upper = history.as_of(after, end, None)
    lower = history.as_of(upper, start, None)
history.fast_forward(lower, upper)
out = collect_git.collect_between(Path(repo), ["main"], upper, lower, attribution="landed", since=start,
                                  window_start=start, window_end=end, history=history, exclude=[] if whole else None)
if whole:
    git_repo.forge(Path(repo))
print(json.dumps({"s": time.perf_counter() - began, "commits": len(out.commits), "lower": lower, "upper": upper}))
"""


def engine(repo: Path, start: str, end: str, floor: dict[str, str], after: dict[str, str],
           whole: bool) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(repo), start, end, json.dumps(floor), json.dumps(after),
                          "whole" if whole else "range"],
                         capture_output=True, text=True, check=True, cwd=c.REPO_ROOT)
    return dict(json.loads(out.stdout))


def plain(repo: Path, upper: str, lower: str) -> float:
    began = time.perf_counter()
    subprocess.run(["git", "log", "--numstat", "--no-merges", upper, "--not", lower, "--"], cwd=repo, env=git_env(),
                   capture_output=True, check=True)
    return time.perf_counter() - began


def rev(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=git_env(), capture_output=True, text=True,
                          check=True).stdout.strip()


def main() -> None:
    args = c.parser(__doc__.splitlines()[0]).parse_args()
    c.announce("bench_placement")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-placement-") as tmp:
        large = build_large_repo(Path(tmp))
        path = large.repo.path
        head = rev(path, "rev-parse", "main")
        last_day = large.authored_at(large.commits - 1).replace(hour=0, minute=0, second=0, microsecond=0)
        middle = large.authored_at(large.commits // 2).replace(hour=0, minute=0, second=0, microsecond=0)
        for label, start, on_time, whole in (
                ("recent day, on time: edge and range", last_day, True, False),
                ("recent day, on time: the whole step", last_day, True, True),
                ("mid-history day, backfill: edges and range", middle, False, False),
                ("mid-history day, backfill: the whole step", middle, False, True)):
            end = start + timedelta(days=1)
            floor = {"main": rev(path, "rev-list", "-n1", f"--before={int(start.timestamp()) - 1}", "main")}
            after = {"main": rev(path, "rev-list", "-n1", f"--before={int((end + timedelta(days=3)).timestamp())}",
                                 "main")}
            base = {"main": head} if on_time else after

            def ours_once() -> dict[str, object]:
                return engine(path, start.isoformat(), end.isoformat(), floor if on_time else {}, base, whole)

            first = ours_once()  # not timed: gives the range git log reads
            upper, lower = first["upper"]["main"], first["lower"]["main"]  # type: ignore[index]
            held = int(first["commits"])  # type: ignore[call-overload]
            ours, theirs = [], []
            for rep in range(c.check_reps(args.reps)):
                if rep % 2:
                    theirs.append(plain(path, upper, lower))
                ours.append(float(ours_once()["s"]))  # type: ignore[arg-type]
                if not rep % 2:
                    theirs.append(plain(path, upper, lower))
            ratio = sorted(a / b for a, b in zip(ours, theirs, strict=False))
            rows.append([label, str(held), c.fmt(min(ours), "s"), c.fmt(min(theirs), "s"),
                         f"{ratio[len(ratio) // 2]:.2f}x"])
    print(c.table(["window (20,000 commits)", "commits", "COLLECT_GIT's git work, fresh process (best)",
                   "git log --numstat (best)", "median ratio"], rows))
    c.save("bench_placement", {"cost": rows, "machine": c.machine()})


if __name__ == "__main__":
    main()
