"""Every commit in exactly one report, on a real repository whose branch advances as a team's does.

A week of a daily 19:30 schedule (``report_on = "interval"``, ``attribution = "landed"``): a
branch authored before the week and merged on Tuesday, a commit pushed after Tuesday's run,
the machine off on Thursday and Friday, a backfill of Thursday afterwards, and a force-push.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.runtime import Runtime
from engine.scheduling import definitions, tick
from engine.store import run_rows
from tests.fakes.gitrepo import GitRepo, make_repo
from tests.support import make_runtime

MON = datetime(2026, 11, 2, tzinfo=UTC)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return MON + timedelta(days=day, hours=hour, minutes=minute)


def runtime(url: str, tmp_path: Path, repo: GitRepo, **schedule: Any) -> Runtime:
    extra = {"projects": [{"key": "app", "repo": str(repo.path), "branches": ["main"], "on_empty": "report"}],
             "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"}}
    spec = dict(name="app-daily", workflow="daily_report", project="app", cron="30 19 * * *", timezone="UTC",
                report_on="interval", attribution="landed", misfire="SKIP", **schedule)
    rt = make_runtime(url, schedules=[spec], clock=ManualClock(at(-1, 20)), extra=extra)
    definitions.apply(rt)
    return rt


def cycle(rt: Runtime, when: datetime) -> None:
    """What ``reportflow cycle`` does at ``when``: tick, then work until idle."""
    assert isinstance(rt.clock, ManualClock)
    rt.clock.set(when)
    tick.tick(rt)
    while Worker(rt, "w").run_one() is not None:
        pass


def reports(rt: Runtime) -> dict[str, dict[str, Any]]:
    """COLLECT_GIT's output of every run that collected, by business key."""
    with rt.store.read() as conn:
        runs = run_rows.list_runs(conn)
        detail = [run_rows.get_run(conn, r.id) for r in runs]
    return {r.business_key: r.steps[0].output for r in detail if r.steps and r.steps[0].output}


def test_each_commit_is_in_exactly_one_daily_report(store_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    base = repo.commit("base", at=at(-7, 9))
    rt = runtime(store_url, tmp_path, repo)
    cycle(rt, at(0, 19, 30))  # Monday's first report

    repo.checkout("feature", create=True)
    feature = repo.commit("feature authored last week", at=at(-3, 15))
    repo.checkout("main")
    monday = repo.commit("monday", at=at(0, 9))
    repo.merge("feature", at=at(1, 10))  # merged on Tuesday
    cycle(rt, at(1, 19, 30))

    repo.checkout("wip", create=True)
    late = repo.commit("committed before tuesday's run, pushed after it", at=at(1, 18))
    repo.checkout("main")
    repo.git("merge", "-q", "--ff-only", "wip")  # the push, at 20:00
    cycle(rt, at(2, 19, 30))

    thursday = repo.commit("thursday", at=at(3, 12))
    friday = repo.commit("friday", at=at(4, 12))
    saturday = repo.commit("saturday", at=at(5, 12))
    cycle(rt, at(5, 19, 30))  # off on Thursday and Friday: their slots are missed

    actions.trigger(rt, "app-daily", day=date(2026, 11, 5))  # Thursday, backfilled afterwards
    cycle(rt, at(5, 20))

    repo.git("reset", "-q", "--hard", "HEAD~1")  # saturday's commit force-pushed away...
    rewritten = repo.commit("saturday, rewritten", at=at(6, 9))  # ...and replaced
    cycle(rt, at(6, 19, 30))

    got = reports(rt)
    held = {key: [c["sha"] for c in out["commits"]] for key, out in got.items()}
    everyone = [sha for shas in held.values() for sha in shas]
    assert len(everyone) == len(set(everyone))  # never in two reports
    # Before the schedule's first window is history, not a report's; after it, every commit.
    assert set(everyone) == {feature, monday, late, thursday, friday, saturday, rewritten} and base not in everyone
    assert held["2026-11-02"] == []
    # Landed on Tuesday: the branch authored the week before, and Monday's commit pushed on Tuesday.
    assert set(held["2026-11-03"]) == {feature, monday}
    assert held["2026-11-04"] == [late]  # pushed after Tuesday's run
    assert set(held["2026-11-07"]) == {thursday, friday, saturday}
    assert got["2026-11-07"]["also_covers"] == ["2026-11-05", "2026-11-06"]
    assert held["2026-11-05"] == [] and got["2026-11-05"]["covered"]  # the backfill adds nothing
    assert held["2026-11-08"] == [rewritten] and got["2026-11-08"]["rewritten"] == ["main"]
    saturday_file = tmp_path / "reports" / "app" / "2026-11-07-app-daily-summary.md"
    text = saturday_file.read_text()
    assert "**Covers:** the commits that landed on the tracked branches during 2026-11-06 19:30 → 2026-11-07 19:30" \
        not in text  # it starts where Wednesday's report ended, not at Friday's slot
    assert "2026-11-04 19:30 → 2026-11-07 19:30 (UTC)" in text and "**Also covers:** 2026-11-05, 2026-11-06" in text


def test_a_rerun_reports_the_same_commits(store_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    first = repo.commit("first", at=at(0, 9))
    rt = runtime(store_url, tmp_path, repo)
    cycle(rt, at(0, 19, 30))
    repo.commit("later", at=at(0, 21))
    (run,) = [r for r in run_rows_list(rt) if r.business_key == "2026-11-02"]
    actions.retry(rt, run.id, from_step="COLLECT_GIT")
    cycle(rt, at(0, 22))
    assert [c["sha"] for c in reports(rt)["2026-11-02"]["commits"]] == [first]
    assert run_rows_list(rt)[0].status is RunStatus.SUCCESS


def run_rows_list(rt: Runtime) -> list[Any]:
    with rt.store.read() as conn:
        return run_rows.list_runs(conn)


def test_a_commit_forced_away_and_back_is_held_once_whatever_runs_afterwards(store_url: str, tmp_path: Path) -> None:
    """A commit force-pushed away, then back, then backfills of the days before it: the report
    that saw it come back holds it, and no backfill of an earlier day holds it again."""
    repo = make_repo(tmp_path)
    base = repo.commit("base", at=at(-7, 9))
    rt = runtime(store_url, tmp_path, repo)
    kept = repo.commit("kept, then forced away and back", at=at(0, 9))
    repo.git("reset", "-q", "--hard", base)  # forced away...
    other = repo.commit("in its place for a while", at=at(0, 10))
    cycle(rt, at(6, 19, 30))  # misfire SKIP: only Sunday's slot runs, over a branch without it
    repo.git("reset", "-q", "--hard", kept)  # ...and back, with a new commit on top
    newer = repo.commit("after it came back", at=at(7, 9))
    cycle(rt, at(7, 19, 30))
    for day in (date(2026, 11, 7), date(2026, 11, 2)):  # backfills of days before, read from the rewritten branch
        actions.trigger(rt, "app-daily", day=day)
        cycle(rt, at(7, 20))

    held = {key: sorted(c["sha"] for c in out["commits"]) for key, out in reports(rt).items()}
    everyone = [sha for shas in held.values() for sha in shas]
    assert sorted(everyone) == sorted({kept, other, newer})  # each exactly once
    # Sunday's report reached back over the missed days (their slots were never run); their backfills are covered.
    assert held["2026-11-09"] == sorted([kept, newer]) and held["2026-11-08"] == [other]
    got = reports(rt)
    assert got["2026-11-08"]["also_covers"] == [f"2026-11-0{d}" for d in range(2, 8)]
    for day in ("2026-11-07", "2026-11-02"):
        assert held[day] == [] and got[day]["covered_by"] == "2026-11-08"
