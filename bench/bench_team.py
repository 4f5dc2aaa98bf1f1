"""A team_weekly_report over 20 projects vs 20 single-project weekly_report runs, one after the other.

Same 20 repositories (60 commits each in the reported ISO week, 1-2 files a commit), the
built-in writer, SQLite in a temporary folder, one in-process worker (``Worker.run_one``
until idle). Per repetition, side by side, the order alternating, each side on a fresh
database (creating it is not timed): the team run (its fan-out, 20 child runs collecting a
project each, the fan-in that writes one report) and the 20 project runs (each collects,
writes and saves its own report). Target (issue 25): team ≤ 1.5× the 20 runs. The load
average is printed: on a shared machine read the ratio, not the absolute times.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import _common as c

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.scheduling import definitions
from tests.fakes.gitrepo import make_repo
from tests.support import make_runtime

PROJECTS = 20
WEEK_MONDAY = datetime(2026, 9, 28, 9, 0, tzinfo=UTC)
NOW = datetime(2026, 10, 5, 12, 0, tzinfo=UTC)


def build_repos(root: Path, commits: int) -> list[dict[str, Any]]:
    projects = []
    for index in range(PROJECTS):
        name = f"p{index:02d}"
        repo = make_repo(root, name)
        for n in range(commits):
            files = {f"src/{name}/m{n % 7}.py": f"value = {n}\n"}
            if n % 3 == 0:
                files[f"docs/{name}.md"] = f"note {n}\n"
            repo.commit(f"{name}: change {n}", at=WEEK_MONDAY + timedelta(minutes=97 * n), files=files)
        projects.append({"key": name, "repo": str(repo.path), "branches": ["main"]})
    return projects


def one_side(root: Path, projects: list[dict[str, Any]], team: bool, rep: int) -> tuple[float, int]:
    """Seconds to drain the queue, and how many runs ended SUCCESS."""
    work = root / f"{'team' if team else 'single'}-{rep}"
    work.mkdir()
    extra = {"projects": projects, "teams": [{"key": "all", "projects": "*"}],
             "reports": {"dir": str(work / "reports")}, "llm": {"provider": "builtin"}}
    if team:
        specs = [dict(name="all-weekly", workflow="team_weekly_report", project="all", cron="0 9 * * 1",
                      timezone="UTC")]
    else:
        specs = [dict(name=f"{p['key']}-weekly", workflow="weekly_report", project=p["key"], cron="0 9 * * 1",
                      timezone="UTC") for p in projects]
    rt = make_runtime(f"sqlite:///{work / 'rf.db'}", schedules=specs, clock=ManualClock(NOW), extra=extra)
    definitions.apply(rt)
    for spec in specs:
        actions.trigger(rt, str(spec["name"]), day=date(2026, 9, 28))
    worker = Worker(rt, "bench")
    seconds, outcomes = c.timed(lambda: list(iter(worker.run_one, None)))
    worker.close()
    rt.store.engine.dispose()
    return seconds, sum(1 for o in outcomes if o.status is RunStatus.SUCCESS)


def main() -> None:
    p = c.parser(__doc__.splitlines()[0], reps=5)
    p.add_argument("--commits", type=int, default=60, help="commits per project in the week")
    args = p.parse_args()
    reps = c.check_reps(args.reps)
    c.announce("bench_team.py")
    team_s, single_s, ratio = [], [], []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp:
        root = Path(tmp)
        projects = build_repos(root / "repos", args.commits)
        one_side(root, projects, True, -1)  # warm-up: imports, page cache
        one_side(root, projects, False, -1)
        for rep in range(reps):
            times = {}
            for team in ((True, False) if rep % 2 == 0 else (False, True)):
                seconds, succeeded = one_side(root, projects, team, rep)
                assert succeeded == (PROJECTS + 1 if team else PROJECTS), succeeded
                times[team] = seconds
            team_s.append(times[True])
            single_s.append(times[False])
            ratio.append(times[True] / times[False])
            print(f"rep {rep}: team {times[True]:.2f} s, 20 runs {times[False]:.2f} s, "
                  f"ratio {ratio[-1]:.2f}×", flush=True)
    load = max(load, os.getloadavg()[0])
    print()
    print(c.table(["what", "min", "median", "max", "reps"], [
        c.stat_row("team_weekly_report, 20 projects", team_s, "s"),
        c.stat_row("20 weekly_report runs, one after the other", single_s, "s"),
        c.stat_row("ratio team ÷ 20 runs", ratio, "x")]))
    print(f"\n{reps} repetitions, {args.commits} commits per project, load average up to {load:.1f}; "
          f"target ≤ 1.5× (median {statistics.median(ratio):.2f}×)")
    c.save("bench_team", {"team_s": team_s, "single_s": single_s, "ratio": ratio, "load_average_max": load,
                          "commits_per_project": args.commits})


if __name__ == "__main__":
    main()
