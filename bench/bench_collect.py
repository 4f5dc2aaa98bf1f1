"""COLLECT_GIT on a 20,000-commit repository vs plain ``git log --numstat``, same windows.

The repository comes from ``tests.fakes.gitrepo.build_large_repo`` (linear ``main``,
50 commits a day from 2025-01-01, 1-3 files changed per commit; no commit-graph
file, like a fresh clone before ``git gc``). Windows: one day and one week, at the
tip of history ("recent") and in its middle ("mid-history").

Per repetition, side by side, the order alternating: ``steps.collect_git.collect``
(open the repository, resolve ``main``, the git subprocess(es), parsing, pydantic
validation) and ``git log --numstat --no-merges --since=S --until=E main`` with
its output read through a pipe. Target (SPEC §11): collect ≤ 1.2× git log for a
recent day, ≤ 1.3× for a mid-history day (2× at the very most). The load average
is printed with each window: on a shared machine, read the ratios (both sides
of one repetition suffer alike), not the absolute times; the CPU-time ratio
(this process plus its git children) is the least disturbed by other load.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

import _common as c

from steps.collect_git import collect
from tests.fakes.gitrepo import build_large_repo, git_env

FMT = "%Y-%m-%d %H:%M:%S +0000"
T = TypeVar("T")


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
    p = c.parser(__doc__.splitlines()[0], reps=9)
    p.add_argument("--commits", type=int, default=20_000)
    p.add_argument("--window", action="append", choices=list(windows(datetime(2025, 1, 1), 700, 50)),
                   help="measure only this window (repeatable; default: all four)")
    args = p.parse_args()
    reps = c.check_reps(args.reps)
    c.announce("bench_collect.py")
    rows, payload = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-collect-") as tmp:
        build_s, large = c.timed(lambda: build_large_repo(Path(tmp), commits=args.commits))
        repo = large.repo.path
        print(f"built a {args.commits:,}-commit repository in {build_s:.1f} s (not timed)", flush=True)
        for label, (start, end) in windows(large.first_at, args.commits, 50).items():
            if args.window and label not in args.window:
                continue
            collect(repo, ["main"], start, end)  # warm-up: page cache, imports
            git_log(repo, start, end)
            ours, theirs, ratio, cpu_ratio = [], [], [], []
            found = printed = 0
            load = os.getloadavg()[0]
            for rep in range(reps):
                # Side by side, the order alternating: whichever runs second finds the
                # page cache and the CPU caches as the first one left them.
                for side in ((0, 1) if rep % 2 == 0 else (1, 0)):
                    if side == 0:
                        (seconds, cpu), output = timed_cpu(lambda s=start, e=end: collect(repo, ["main"], s, e))
                        found = len(output.commits)
                    else:
                        (baseline, base_cpu), printed = timed_cpu(lambda s=start, e=end: git_log(repo, s, e))
                ours.append(seconds)
                theirs.append(baseline)
                ratio.append(seconds / baseline)
                cpu_ratio.append(cpu / base_cpu)
            load = max(load, os.getloadavg()[0])
            rows.append([label, f"{found:,} / {printed:,}", *spread(ours, "ms"), *spread(theirs, "ms"),
                         *spread(ratio, "x"), *spread(cpu_ratio, "x"), f"{load:.1f}"])
            payload[label] = {"collect_s": ours, "git_log_s": theirs, "ratio": ratio, "cpu_ratio": cpu_ratio,
                              "commits": found, "git_log_commits": printed, "load_average_max": load}
            print(f"{label}: collect {statistics.median(ours) * 1000:.1f} ms, git log "
                  f"{statistics.median(theirs) * 1000:.1f} ms, ratio {statistics.median(ratio):.2f}×, "
                  f"CPU ratio {statistics.median(cpu_ratio):.2f}× (load average up to {load:.1f})", flush=True)
    print()
    print(c.table(["window", "commits (collect / git log)", "collect min / median / max",
                   "git log min / median / max", "ratio min / median / max", "CPU ratio min / median / max",
                   "load avg"], rows))
    print(f"\n{reps} repetitions; ratio = collect ÷ git log (wall time) in the same repetition; CPU ratio "
          "= the same for CPU time, this process's and its git children's (less sensitive to a busy "
          "machine); target ≤ 1.2× for a recent day, ≤ 1.3× mid-history (2× at the very most)")
    c.save("bench_collect", payload)


def timed_cpu(fn: Callable[[], T]) -> tuple[tuple[float, float], T]:
    """((wall seconds, CPU seconds of this process and of the children it waited for), result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = fn()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return (wall, cpu), result


def spread(values: list[float], unit: str) -> list[str]:
    """``min / median / max`` as one cell (median in bold)."""
    s = c.summary(values)
    return [f"{c.fmt(s['min'], unit)} / **{c.fmt(s['median'], unit)}** / {c.fmt(s['max'], unit)}"]


if __name__ == "__main__":
    main()
