"""Every commit in the report of its own day, whatever order the runs execute in: a real history, on-time runs,
then a backfill of the days before them by three worker processes at once.

The history is this repository's own, its dates stretched (``replay.stretched_history``). A week runs on
time, the branch advancing as it did; then ``backfill`` asks for the twenty days before them, and three
``reportflow work`` processes share the queue. Four fresh databases of each kind (two without ``--long``):
every time, each day's report holds exactly the commits that reached the branch that day, as plain git tells
it here (the first-parent chain's committer dates, a merge bringing its branch): none in another day, none
left out.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from engine.store import run_rows
from tests.acceptance import procs
from tests.reliability import replay
from tests.support import make_runtime, run_cli, write_config

pytestmark = pytest.mark.slow

LIVE_DAYS, BACKFILLED_DAYS, WORKERS = 7, 20, 3


def oracle(repo: Path) -> dict[date, set[str]]:
    """Plain git: each non-merge commit by the UTC day its first-parent commit reached ``main``, i.e. the running
    maximum of the chain's committer dates (a commit cannot be on the branch before its ancestors)."""
    chain = [row.split() for row in replay.git(repo, "log", "--first-parent", "--reverse", "--format=%H %ct %P",
                                                "main").splitlines()]
    out: dict[date, set[str]] = {}
    latest = 0
    for sha, ct, *parents in chain:
        latest = max(latest, int(ct))
        brought = replay.git(repo, "rev-list", "--no-merges", sha, *(["--not", parents[0]] if parents else []))
        out.setdefault(datetime.fromtimestamp(latest, UTC).date(), set()).update(brought.split())
    return out


def head_at(repo: Path, head: str, instant: datetime) -> str:
    """The newest first-parent commit of ``head`` whose running committer-date maximum is before ``instant``: the
    branch as it stood then."""
    best, latest = "", 0
    for row in replay.git(repo, "log", "--first-parent", "--reverse", "--format=%H %ct", head).splitlines():
        sha, ct = row.split()
        latest = max(latest, int(ct))
        if latest >= instant.timestamp():
            break
        best = sha
    return best


@pytest.mark.parametrize("repetition", [0, 1, *(pytest.param(n, marks=pytest.mark.long) for n in (2, 3))])
def test_a_backfill_after_on_time_days_gives_each_day_its_own_commits(store_url: str, tmp_path: Path,
                                                                       repetition: int) -> None:
    source, _ = replay.stretched_history(tmp_path)
    expected = oracle(source)
    final = replay.git(source, "rev-parse", "main").strip()
    last = max(expected)  # the history's last day: the on-time runs end there
    live = [last - timedelta(days=n) for n in range(LIVE_DAYS - 1, -1, -1)]
    backfilled = [live[0] - timedelta(days=n) for n in range(BACKFILLED_DAYS, 0, -1)]
    config = write_config(
        tmp_path / "reportflow.toml", db_url=store_url,
        sections={"reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"}},
        projects=[{"key": "history", "repo": str(source), "branches": ["main"], "on_empty": "report"}],
        schedules=[{"name": "history-daily", "workflow": "daily_report", "project": "history", "cron": "0 3 * * *",
                    "timezone": "UTC", "attribution": "landed"}])

    def slot(day: date) -> datetime:
        return datetime(day.year, day.month, day.day, 3, tzinfo=UTC) + timedelta(days=1)

    def cli(*args: str, now: datetime) -> str:
        done = run_cli(*args, config=config, now=now.strftime("%Y-%m-%dT%H:%M:%SZ"), timeout=300)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    cli("schedules", "apply", now=slot(live[0]) - timedelta(hours=1))
    for day in live:  # on time: the branch as it stood at each slot
        replay.git(source, "update-ref", "refs/heads/main", head_at(source, final, slot(day)))
        cli("cycle", now=slot(day) + timedelta(minutes=1))
    replay.git(source, "update-ref", "refs/heads/main", final)
    after = slot(live[-1]) + timedelta(hours=2)
    cli("backfill", "history-daily", "--from", backfilled[0].isoformat(), "--to", backfilled[-1].isoformat(),
        now=after)
    clock = procs.Shared(after)
    workers = [procs.spawn(tmp_path, config, "work", "--until-idle", now=clock.at(), log_name=f"work-{n}.log")
               for n in range(WORKERS)]
    for worker in workers:
        out, log = procs.finish(worker, timeout=600)
        assert worker.returncode == 0, log[-3000:]

    rt = make_runtime(store_url)
    try:
        with rt.store.read() as conn:
            runs = [run_rows.get_run(conn, r.id) for r in run_rows.list_runs(conn, limit=None)]
    finally:
        rt.store.dispose()
    held = {r.business_key: r.steps[0].output for r in runs if r.steps and r.steps[0].output}
    days = [*backfilled, *live]
    assert sorted(held) == [d.isoformat() for d in days], sorted(held)
    assert {r.status.value for r in runs} == {"SUCCESS"}
    for day in days:
        got = held[day.isoformat()]
        assert not got["covered"] and got["also_covers"] == [], (day, got["covered"], got["also_covers"])
        shas = {c["sha"] for c in got["commits"]}
        want = expected.get(day, set())
        assert shas == want, (f"repetition {repetition}, {day}: {len(shas - want)} not of this day, "
                              f"{len(want - shas)} missing")
    assert sum(len(expected.get(d, ())) for d in backfilled) > 0  # the backfilled days had work to place


def test_the_oracle_reads_the_branch_as_git_does(tmp_path: Path) -> None:
    """The oracle's day boundaries agree with ``git log --first-parent --until`` on a history without clock skew."""
    source, chain = replay.stretched_history(tmp_path)
    expected = oracle(source)
    day = sorted(expected)[len(expected) // 2]
    edge = datetime(day.year, day.month, day.day, tzinfo=UTC)
    if all(ct <= b for (_, ct), (_, b) in zip(chain, chain[1:], strict=False)):
        until = subprocess.run(["git", "rev-list", "--first-parent", "-n1", f"--before={int(edge.timestamp()) - 1}",
                                "main"], cwd=source, capture_output=True, text=True, check=True).stdout.strip()
        assert head_at(source, "main", edge) == until
