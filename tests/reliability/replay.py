"""A replay harness: a real history re-lived slot by slot, and a count of the commits in 0, 1 and 2+ reports.

The history is this repository's own (the first-parent chain to ``HISTORY_AT``, merges of
branches included), rewritten by ``git fast-export | fast-import`` with its dates stretched
``SCALE`` times, so that four days of work become two months of daily and weekly slots. A
replica's ``main`` advances as the history did: to each first-parent commit at its committer
time, some of them late (pushed a day or two after they were made), once to a rewritten copy
and back (two force-pushes). A second, built repository gives the team report what the first
lacks: a branch authored three weeks before its merge, and a second tracked branch sharing
commits with the first. Between them, ``cycle`` (tick, reconcile, work until idle) runs at
every slot of three schedules (a daily, a weekly, a team daily over both repositories), except
during two outages, the second longer than the catch-up window, and the daily's cron is edited
half-way.

``replay`` returns, per schedule and project, how many commits are in no report, in one, and
in two or more, and how many were placed in the report whose span holds the moment they
landed.
"""

from __future__ import annotations

import random
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core import inputs
from engine.core.cron import timetable
from engine.execution import reconciler
from engine.execution.worker import Worker
from engine.runtime import Runtime
from engine.scheduling import definitions, tick
from engine.store import run_rows
from steps import collect_git
from tests.fakes.gitrepo import git_date, git_env, make_repo
from tests.support import REPO_ROOT, RuntimeFactory

#: The commit whose history is replayed: fixed, so the replay is the same on every clone.
HISTORY_AT = "31bd40d"
SCALE = 15
START = datetime(2027, 1, 4, tzinfo=UTC)  # a Monday


@dataclass(frozen=True)
class Landing:
    """``ref`` moves to ``sha`` at ``at`` (a push; ``forced`` when it is not a fast-forward)."""

    at: datetime
    ref: str
    sha: str
    forced: bool = False


@dataclass
class Line:
    """What one schedule's reports hold for one project."""

    reports: dict[str, list[str]] = field(default_factory=dict)  # business key -> SHAs
    spans: dict[str, tuple[datetime, datetime]] = field(default_factory=dict)


@dataclass(frozen=True)
class Count:
    schedule: str
    project: str
    commits: int
    in_none: int
    in_one: int
    in_two_or_more: int
    placed_when_landed: int

    def row(self) -> list[str]:
        share = self.placed_when_landed / max(1, self.in_one + self.in_two_or_more)
        return [self.schedule, self.project, str(self.commits), str(self.in_none), str(self.in_one),
                str(self.in_two_or_more), f"{share:.1%}"]


def git(repo: Path, *args: str, data: bytes | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True, env=git_env(env), check=True)
    return proc.stdout.decode()


def stretched_history(root: Path, scale: int = SCALE) -> tuple[Path, list[tuple[str, int]]]:
    """A bare repository holding this repository's history to ``HISTORY_AT``, its dates stretched ``scale`` times;
    and its first-parent chain as (sha, committer time), oldest first."""
    source = REPO_ROOT
    git(source, "cat-file", "-e", f"{HISTORY_AT}^{{commit}}")
    first = int(git(source, "log", "--format=%ct", "--max-parents=0", HISTORY_AT).split()[0])
    target = root / "stretched.git"
    git(root, "init", "-q", "--bare", str(target))
    exporter = subprocess.Popen(["git", "fast-export", "--reencode=yes", HISTORY_AT],
                                cwd=source, stdout=subprocess.PIPE, env=git_env())
    importer = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=target, stdin=subprocess.PIPE, env=git_env())
    assert exporter.stdout is not None and importer.stdin is not None
    ident = re.compile(rb"^((?:author|committer|tagger) .*> )(\d+)( [+-]\d{4})\n$")
    for line in iter(exporter.stdout.readline, b""):
        if line.startswith(b"data "):
            size = int(line[5:])
            importer.stdin.write(line + exporter.stdout.read(size))
            continue
        if line.startswith((b"commit ", b"reset ")):  # exported by SHA: name the branch it rebuilds
            line = line.split(b" ", 1)[0] + b" refs/heads/main\n"
        match = ident.match(line)
        if match:
            stamp = int(START.timestamp()) + (int(match.group(2)) - first) * scale
            line = match.group(1) + str(stamp).encode() + match.group(3) + b"\n"
        importer.stdin.write(line)
    importer.stdin.close()
    exporter.stdout.close()  # read to its end: the export is over
    assert exporter.wait() == 0 and importer.wait() == 0
    chain = git(target, "log", "--first-parent", "--reverse", "--format=%H %ct", "main").split("\n")
    return target, [(sha, int(ct)) for sha, ct in (row.split() for row in chain if row)]


def landings_of(chain: Sequence[tuple[str, int]], repo: Path, rng: random.Random) -> list[Landing]:
    """The branch advancing along ``chain``: most commits pushed when made, some one or two days late
    (and what was made meanwhile with them), one replaced by a rewritten copy and back."""
    out: list[Landing] = []
    ready = START
    for index, (sha, ct) in enumerate(chain):
        made = datetime.fromtimestamp(ct, UTC)
        late = timedelta(days=rng.choice((1, 2))) if rng.random() < 0.08 else timedelta(0)
        ready = max(ready, made + late + timedelta(minutes=5))
        out.append(Landing(ready, "main", sha))
        if index == len(chain) // 3:  # a force-push: this commit replaced by a rewritten copy, then back
            when = git_date(ready + timedelta(hours=2))
            copy = git(repo, "commit-tree", f"{sha}^{{tree}}", "-p", f"{sha}^", "-m", "rewritten copy",
                       env={"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}).strip()
            git(repo, "update-ref", "refs/rewritten/copy", copy)  # fetched into the replica with the rest
            out.append(Landing(ready + timedelta(hours=2), "main", copy, forced=True))
            ready += timedelta(hours=30)  # the next push (back on the real chain) is forced too
    return out


def built_repository(root: Path) -> tuple[Path, list[Landing]]:
    """A repository for what the real history lacks: a branch authored three weeks before its merge,
    and a second tracked branch (``release``) that shares commits with ``main``."""
    work = make_repo(root, "built")
    day = START + timedelta(days=2, hours=10)
    work.commit("base", at=START - timedelta(days=1))
    landings = [Landing(START, "main", work.head()), Landing(START, "release", work.head())]
    work.checkout("old-feature", create=True)
    authored = [work.commit(f"feature part {i}", at=day - timedelta(days=21 - i)) for i in range(3)]
    work.checkout("main")
    for week in range(8):
        at = day + timedelta(days=7 * week)
        sha = work.commit(f"main work, week {week}", at=at)
        landings.append(Landing(at + timedelta(minutes=5), "main", sha))
        if week == 3:
            merged = work.merge("old-feature", at=at + timedelta(hours=1))
            landings.append(Landing(at + timedelta(hours=1, minutes=5), "main", merged))
        if week % 2 == 1:  # release follows main now and then: its commits are main's
            landings.append(Landing(at + timedelta(hours=3), "release", work.head()))
    assert authored
    return work.path, landings


def replica(source: Path, root: Path, name: str) -> Path:
    """A bare copy of ``source`` whose branches start empty: the landings move them."""
    target = root / f"{name}.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--no-tags", str(source), str(target)], env=git_env(), check=True)
    for ref in git(target, "for-each-ref", "--format=%(refname)", "refs/heads").split():
        git(target, "update-ref", "-d", ref)
    return target


SCHEDULES: list[dict[str, Any]] = [
    dict(name="history-daily", workflow="daily_report", project="history", cron="30 19 * * *", timezone="Asia/Seoul",
         report_on="interval", attribution="landed", misfire="CATCH_UP_ALL", catchup_window="7d"),
    dict(name="history-weekly", workflow="weekly_report", project="history", cron="0 9 * * 1", timezone="Asia/Seoul",
         report_on="previous", attribution="landed", misfire="RUN_ONCE"),
    dict(name="team-daily", workflow="team_daily_report", project="team", cron="0 20 * * *", timezone="Asia/Seoul",
         projects=["history", "built"], report_on="interval", attribution="landed", misfire="SKIP"),
]
CRON_EDIT = ("history-daily", "0 20 * * *")


def settings(root: Path, history: Path, built: Path) -> dict[str, Any]:
    """The two projects (the history's ``main``, the built repository's ``main`` and ``release``) and reports."""
    return {"projects": [{"key": "history", "repo": str(history), "branches": ["main"]},
                         {"key": "built", "repo": str(built), "branches": ["main", "release"]}],
            "reports": {"dir": str(root / "reports")}, "llm": {"provider": "builtin"}}


def slots(until: datetime) -> list[datetime]:
    """Every slot of every schedule (with the daily's cron before and after its edit) up to ``until``."""
    out: set[datetime] = set()
    for spec in SCHEDULES:
        for expr in {spec["cron"], CRON_EDIT[1]} if spec["name"] == CRON_EDIT[0] else {spec["cron"]}:
            out.update(f.at for f in timetable.fires_between(expr, spec["timezone"], START, until))
    return sorted(out)


def cycle(rt: Runtime) -> None:
    """``reportflow cycle`` in this process: tick, a reconcile pass, then work until idle."""
    tick.tick(rt)
    reconciler.sweep(rt)
    worker = Worker(rt, "replay")
    try:
        while worker.run_one() is not None:
            pass
    finally:
        worker.close()


@dataclass
class Replay:
    counts: list[Count]
    cycles: int
    runs: int
    collect_s: float
    git_log_s: float
    seconds: float


def replay(runtime: RuntimeFactory, url: str, root: Path, *, seed: int) -> Replay:
    """Re-live the histories (see the module) and count where each commit went; ``runtime`` builds the
    runtimes (one before the cron edit, one after)."""
    started = time.perf_counter()
    rng = random.Random(seed)
    stretched, chain = stretched_history(root)
    history = replica(stretched, root, "history")
    built_source, built_landings = built_repository(root)
    built = replica(built_source, root, "built")
    events = [(landing, history) for landing in landings_of(chain, stretched, rng)]
    # The rewritten copy lives in the stretched repository: bring it over with the rest.
    git(history, "fetch", "-q", str(stretched), "+refs/rewritten/*:refs/rewritten/*")
    events += [(landing, built) for landing in built_landings]
    events.sort(key=lambda e: e[0].at)
    last = max(landing.at for landing, _ in events)
    end = last + timedelta(days=9)
    outages = [(START + timedelta(days=12), START + timedelta(days=15)),  # three days off
               (START + timedelta(days=30), START + timedelta(days=41))]  # eleven, across two Mondays
    edit_at = START + timedelta(days=24)
    schedules = [dict(s) for s in SCHEDULES]
    extra = settings(root, history, built)
    rt = runtime(url, schedules=schedules, at=START - timedelta(hours=1), config=extra, apply=True)
    clock = rt.clock
    pending = list(events)
    cycles = 0
    edited = False
    first_day = START + timedelta(days=1)  # every tracked branch exists by then
    for slot in [s for s in slots(end) if s >= first_day] + [end]:
        while pending and pending[0][0].at <= slot:
            landing, repo = pending.pop(0)
            git(repo, "update-ref", f"refs/heads/{landing.ref}", landing.sha)
        if not edited and slot >= edit_at:
            schedules[0]["cron"] = CRON_EDIT[1]
            rt = runtime(url, schedules=schedules, at=slot - timedelta(minutes=1), config=extra)
            clock = rt.clock
            definitions.apply(rt, confirmed=True)
            edited = True
        if any(a <= slot < b for a, b in outages):
            continue
        clock.set(slot + timedelta(seconds=30))
        cycle(rt)
        cycles += 1
    final = {repo: set(git(repo, "for-each-ref", "--format=%(objectname)", "refs/heads").split())
             for repo in (history, built)}
    counts, runs = _count(rt, {"history": history, "built": built}, events, final)
    collect_s, git_log_s = _collect_cost(rt, {"history": history, "built": built})
    return Replay(counts, cycles, runs, collect_s, git_log_s, time.perf_counter() - started)


def _universe(repo: Path, first_lower: dict[str, str], landings: Sequence[Landing],
              final: set[str]) -> dict[str, datetime]:
    """Every non-merge commit on a tracked branch at the end and not before the line's first mark, with when it
    landed (a commit force-pushed away for good need not be in a report; it must not be in two)."""
    visible = set(_reach(repo, sorted(final)))
    known: set[str] = set(_reach(repo, list(first_lower.values()))) if first_lower else set()
    landed: dict[str, datetime] = {}
    for landing in landings:
        for sha in _reach(repo, [landing.sha]):
            if sha in visible and sha not in known and sha not in landed:
                landed[sha] = landing.at
    return landed


def _reach(repo: Path, heads: Sequence[str]) -> list[str]:
    return git(repo, "rev-list", "--no-merges", *heads, "--").split() if heads else []


def _lines(rt: Runtime) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(schedule, project, business key, COLLECT_GIT output) of the latest revision of every period."""
    with rt.store.read() as conn:
        runs = run_rows.list_runs(conn)
        latest: dict[tuple[str, str, str], Any] = {}
        for run in sorted(runs, key=lambda r: r.revision):
            detail = run_rows.get_run(conn, run.id)
            schedule = str(detail.pinned.get("schedule", ""))
            if detail.steps and detail.steps[0].name == "COLLECT_GIT" and detail.steps[0].output:
                parent = detail.pinned.get("parent_key")
                key = detail.business_key
                latest[(schedule, detail.project, key if not parent else f"{key}")] = detail.steps[0].output
    for (schedule, project, key), output in latest.items():
        yield schedule, project, key, output


def _count(rt: Runtime, repos: dict[str, Path], events: Sequence[tuple[Landing, Path]],
           final: dict[Path, set[str]]) -> tuple[list[Count], int]:
    lines: dict[tuple[str, str], Line] = {}
    firsts: dict[tuple[str, str], tuple[datetime, dict[str, str]]] = {}
    for schedule, project, key, output in _lines(rt):
        line = lines.setdefault((schedule, project), Line())
        line.reports[key] = [c["sha"] for c in [*output["commits"], *output.get("arrived_late", [])]]
        since, until = inputs.instant(output["since"]), inputs.instant(output["until"])
        line.spans[key] = (since, until)
        if (schedule, project) not in firsts or since < firsts[(schedule, project)][0]:
            firsts[(schedule, project)] = (since, output["since_heads"])
    with rt.store.read() as conn:
        runs = len(run_rows.list_runs(conn))
    counts = []
    for (schedule, project), line in sorted(lines.items()):
        repo = repos[project]
        landings = [landing for landing, where in events if where == repo]
        universe = _universe(repo, firsts[(schedule, project)][1], landings, final[repo])
        times: dict[str, int] = {}
        placed = 0
        for key, shas in line.reports.items():
            since, until = line.spans[key]
            for sha in shas:
                times[sha] = times.get(sha, 0) + 1
                if sha in universe and since <= universe[sha] < until:
                    placed += 1
        counts.append(Count(schedule, project, len(universe), sum(1 for s in universe if s not in times),
                            sum(1 for s in universe if times.get(s) == 1), sum(1 for n in times.values() if n > 1),
                            placed))
    return counts, runs


def _collect_cost(rt: Runtime, repos: dict[str, Path]) -> tuple[float, float]:
    """Seconds of ``collect_git.collect_between`` (a report's collection with its bounds pinned) and of
    ``git log --numstat`` over the same ranges (the floor COLLECT_GIT sits on), summed over every report."""
    ours = plain = 0.0
    for _schedule, project, _key, output in _lines(rt):
        upper, lower = dict(output["heads"]), dict(output.get("since_heads") or {})
        if not upper or output.get("covered"):
            continue
        began = time.perf_counter()
        collect_git.collect_between(repos[project], list(upper), upper, lower, attribution="landed",
                                    since=inputs.instant(output["since"]), window_start=inputs.instant(output["window_start"]),
                                    window_end=inputs.instant(output["window_end"]))
        ours += time.perf_counter() - began
        began = time.perf_counter()
        git(repos[project], "log", "--no-merges", "--numstat", *upper.values(),
            *(["--not", *lower.values()] if lower else []), "--")
        plain += time.perf_counter() - began
    return ours, plain
