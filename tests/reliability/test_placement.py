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
from tests.support import make_runtime, output_of, run_cli, write_config

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


def period_key(day: date, kind: str) -> str:
    """A month or quarter as the documentation spells its key (``2027-03``, ``2027-Q1``), written out here."""
    return f"{day.year:04d}-{day.month:02d}" if kind == "month" else f"{day.year:04d}-Q{(day.month - 1) // 3 + 1}"


def first_of_next(day: date, months: int) -> date:
    start = date(day.year, day.month - (day.month - 1) % months, 1)
    after = start.month - 1 + months
    return date(start.year + after // 12, after % 12 + 1, 1)


@pytest.mark.parametrize(("workflow", "kind", "months"), [("monthly_report", "month", 1),
                                                          ("quarterly_report", "quarter", 3)])
def test_months_and_quarters_backfilled_after_on_time_ones_hold_their_own_commits(
        store_url: str, tmp_path: Path, workflow: str, kind: str, months: int) -> None:
    """The same promise for the longer periods: a history stretched over fourteen months, the last periods on
    time, then a backfill of every period before them by two workers; each report holds its period's commits."""
    source, _ = replay.stretched_history(tmp_path, scale=150)
    by_day = oracle(source)
    expected: dict[str, set[str]] = {}
    for day, shas in by_day.items():
        expected.setdefault(period_key(day, kind), set()).update(shas)
    final = replay.git(source, "rev-parse", "main").strip()
    starts = [date(min(by_day).year, min(by_day).month - (min(by_day).month - 1) % months, 1)]
    while first_of_next(starts[-1], months) <= max(by_day):  # every period, quiet ones too
        starts.append(first_of_next(starts[-1], months))
    live, backfilled = starts[-2:], starts[:-2]
    assert len(backfilled) >= (3 if kind == "quarter" else 10) and len(expected) > len(starts) // 2
    config = write_config(
        tmp_path / "reportflow.toml", db_url=store_url,
        sections={"reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"}},
        projects=[{"key": "history", "repo": str(source), "branches": ["main"], "on_empty": "report"}],
        schedules=[{"name": f"history-{kind}", "workflow": workflow, "project": "history",
                    "cron": "0 3 1 */3 *" if kind == "quarter" else "0 3 1 * *", "timezone": "UTC",
                    "attribution": "landed"}])

    def slot(start: date) -> datetime:  # the 1st after the period, 03:00
        after = first_of_next(start, months)
        return datetime(after.year, after.month, after.day, 3, tzinfo=UTC)

    def cli(*args: str, now: datetime) -> None:
        done = run_cli(*args, config=config, now=now.strftime("%Y-%m-%dT%H:%M:%SZ"), timeout=300)
        assert done.returncode == 0, (args, done.stdout, done.stderr)

    cli("schedules", "apply", now=slot(live[0]) - timedelta(hours=1))
    for start in live:
        replay.git(source, "update-ref", "refs/heads/main", head_at(source, final, slot(start)))
        cli("cycle", now=slot(start) + timedelta(minutes=1))
    replay.git(source, "update-ref", "refs/heads/main", final)
    after = slot(live[-1]) + timedelta(hours=2)
    cli("backfill", f"history-{kind}", "--from", backfilled[0].isoformat(),
        "--to", (first_of_next(backfilled[-1], months) - timedelta(days=1)).isoformat(), now=after)
    clock = procs.Shared(after)
    workers = [procs.spawn(tmp_path, config, "work", "--until-idle", now=clock.at(), log_name=f"work-{n}.log")
               for n in range(2)]
    for worker in workers:
        _, log = procs.finish(worker, timeout=600)
        assert worker.returncode == 0, log[-3000:]
    rt = make_runtime(store_url)
    try:
        with rt.store.read() as conn:
            runs = [run_rows.get_run(conn, r.id) for r in run_rows.list_runs(conn, limit=None)]
    finally:
        rt.store.dispose()
    assert {r.status.value for r in runs} == {"SUCCESS"}
    held = {r.business_key: {c["sha"] for c in output_of(r, 0)["commits"]} for r in runs}
    assert sorted(held) == [period_key(s, kind) for s in starts]
    for key, shas in held.items():
        want = expected.get(key, set())
        assert shas == want, f"{key}: {len(shas - want)} not of this {kind}, {len(want - shas)} missing"
    files = sorted(p.name for p in (tmp_path / "reports" / "history").glob("*.md"))
    assert files == sorted(f"{period_key(s, kind)}-history-{kind}ly-summary.md" for s in starts)


ANCHOR, SPRINT_DAYS = date(2027, 1, 4), 14  # the history's first Monday; two-week sprints


def sprint_key(day: date) -> str:
    """A sprint's key as the documentation defines it, written out here: the n-th sprint starting in its year."""
    start = ANCHOR + timedelta(days=(day - ANCHOR).days // SPRINT_DAYS * SPRINT_DAYS)
    behind = (date(start.year, 1, 1) - ANCHOR).days
    first = ANCHOR + timedelta(days=-(-behind // SPRINT_DAYS) * SPRINT_DAYS)
    return f"{start.year:04d}-S{(start - first).days // SPRINT_DAYS + 1:02d}"


def test_sprints_backfilled_after_on_time_ones_hold_their_own_commits(store_url: str, tmp_path: Path) -> None:
    """Two-week sprints over a history stretched across fourteen months, reported each Monday (the Monday a
    sprint ends on reports it; the one between finds it reported): the last two on time, the rest backfilled by
    two workers; each report holds its sprint's commits."""
    source, _ = replay.stretched_history(tmp_path, scale=150)
    by_day = oracle(source)
    expected: dict[str, set[str]] = {}
    for day, shas in by_day.items():
        expected.setdefault(sprint_key(day), set()).update(shas)
    final = replay.git(source, "rev-parse", "main").strip()
    starts = [ANCHOR]
    while starts[-1] + timedelta(days=SPRINT_DAYS) <= max(by_day):
        starts.append(starts[-1] + timedelta(days=SPRINT_DAYS))
    live, backfilled = starts[-2:], starts[:-2]
    config = write_config(
        tmp_path / "reportflow.toml", db_url=store_url,
        sections={"reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"}},
        projects=[{"key": "history", "repo": str(source), "branches": ["main"], "on_empty": "report"}],
        schedules=[{"name": "history-sprint", "workflow": "sprint_report", "project": "history",
                    "cron": "0 3 * * 1", "timezone": "UTC", "attribution": "landed",
                    "sprint": {"length": f"{SPRINT_DAYS}d", "anchor": ANCHOR.isoformat()}}])

    def slot(start: date) -> datetime:  # the Monday the sprint ends on, 03:00
        end = start + timedelta(days=SPRINT_DAYS)
        return datetime(end.year, end.month, end.day, 3, tzinfo=UTC)

    def cli(*args: str, now: datetime) -> None:
        done = run_cli(*args, config=config, now=now.strftime("%Y-%m-%dT%H:%M:%SZ"), timeout=300)
        assert done.returncode == 0, (args, done.stdout, done.stderr)

    cli("schedules", "apply", now=slot(live[0]) - timedelta(hours=1))
    for start in live:
        replay.git(source, "update-ref", "refs/heads/main", head_at(source, final, slot(start)))
        cli("cycle", now=slot(start) + timedelta(minutes=1))
        cli("cycle", now=slot(start) + timedelta(days=7, minutes=1))  # the Monday between: nothing new
    replay.git(source, "update-ref", "refs/heads/main", final)
    after = slot(live[-1]) + timedelta(days=8)
    cli("backfill", "history-sprint", "--from", backfilled[0].isoformat(),
        "--to", (backfilled[-1] + timedelta(days=SPRINT_DAYS - 1)).isoformat(), now=after)
    clock = procs.Shared(after)
    workers = [procs.spawn(tmp_path, config, "work", "--until-idle", now=clock.at(), log_name=f"work-{n}.log")
               for n in range(2)]
    for worker in workers:
        _, log = procs.finish(worker, timeout=600)
        assert worker.returncode == 0, log[-3000:]
    rt = make_runtime(store_url)
    try:
        with rt.store.read() as conn:
            runs = [run_rows.get_run(conn, r.id) for r in run_rows.list_runs(conn, limit=None)]
    finally:
        rt.store.dispose()
    assert {r.status.value for r in runs} == {"SUCCESS"}
    held = {r.business_key: {c["sha"] for c in output_of(r, 0)["commits"]} for r in runs}
    assert sorted(held) == sorted(sprint_key(s) for s in starts) and len(runs) == len(starts)
    for key, shas in held.items():
        want = expected.get(key, set())
        assert shas == want, f"{key}: {len(shas - want)} not of this sprint, {len(want - shas)} missing"
    assert len(backfilled) >= 25 and sum(len(v) for v in expected.values()) == sum(len(v) for v in by_day.values())
