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
from engine.scheduling import tick
from engine.store import run_rows
from tests.fakes.gitrepo import GitRepo, make_repo
from tests.support import ManualRuntime, RuntimeFactory, drain

MON = datetime(2026, 11, 2, tzinfo=UTC)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return MON + timedelta(days=day, hours=hour, minutes=minute)


def app_daily_runtime(runtime: RuntimeFactory, url: str, tmp_path: Path, repo: GitRepo,
                      **schedule: Any) -> ManualRuntime:
    """The ``app-daily`` 19:30 schedule (landed commits, reported by interval) applied the evening before Monday."""
    extra = {"projects": [{"key": "app", "repo": str(repo.path), "branches": ["main"], "on_empty": "report"}],
             "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"}}
    spec = dict(name="app-daily", workflow="daily_report", project="app", cron="30 19 * * *", timezone="UTC",
                report_on="interval", attribution="landed", misfire="SKIP", **schedule)
    return runtime(url, schedules=[spec], at=at(-1, 20), config=extra, apply=True)


def cycle(rt: Runtime, when: datetime) -> None:
    """What ``reportflow cycle`` does at ``when``: tick, then work until idle."""
    assert isinstance(rt.clock, ManualClock)
    rt.clock.set(when)
    tick.tick(rt)
    drain(Worker(rt, "w"))


def reports(rt: Runtime) -> dict[str, dict[str, Any]]:
    """COLLECT_GIT's output of every run that collected, by business key."""
    with rt.store.read() as conn:
        runs = run_rows.list_runs(conn)
        detail = [run_rows.get_run(conn, r.id) for r in runs]
    return {r.business_key: r.steps[0].output for r in detail if r.steps and r.steps[0].output}


def test_each_commit_is_in_exactly_one_daily_report(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    repo = make_repo(tmp_path)
    base = repo.commit("base", at=at(-7, 9))
    rt = app_daily_runtime(runtime, store_url, tmp_path, repo)
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
    assert held["2026-11-05"] == [] and got["2026-11-05"]["covered_by"] == "2026-11-07"  # the backfill adds nothing
    thursday_text = (tmp_path / "reports" / "app" / "2026-11-05-app-daily-summary.md").read_text()
    assert "**Covered by the report of 2026-11-07:**" in thursday_text  # the earlier-decided report it is in
    assert "2026-11-04 19:30 → 2026-11-05 19:30 (UTC)" in thursday_text  # its own window, not a zero-width span
    assert held["2026-11-08"] == [rewritten] and got["2026-11-08"]["rewritten"] == ["main"]
    saturday_file = tmp_path / "reports" / "app" / "2026-11-07-app-daily-summary.md"
    text = saturday_file.read_text()
    assert "**Covers:** the commits that landed on the tracked branches during 2026-11-06 19:30 → 2026-11-07 19:30" \
        not in text  # it starts where Wednesday's report ended, not at Friday's slot
    assert "2026-11-04 19:30 → 2026-11-07 19:30 (UTC)" in text and "**Also covers:** 2026-11-05, 2026-11-06" in text


def test_a_rerun_reports_the_same_commits(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    repo = make_repo(tmp_path)
    first = repo.commit("first", at=at(0, 9))
    rt = app_daily_runtime(runtime, store_url, tmp_path, repo)
    cycle(rt, at(0, 19, 30))
    repo.commit("later", at=at(0, 21))
    (run,) = [r for r in run_rows_list(rt) if r.business_key == "2026-11-02"]
    actions.retry(rt, run.id, from_step="COLLECT_GIT")
    cycle(rt, at(0, 22))
    assert [c["sha"] for c in reports(rt)["2026-11-02"]["commits"]] == [first]
    assert run_rows_list(rt)[0].status is RunStatus.SUCCESS


def work(rt: Runtime, when: datetime, day: date | None = None) -> None:
    """At ``when``, trigger ``day`` (if given) and run what is queued, no tick: only the runs a test asked for."""
    assert isinstance(rt.clock, ManualClock)
    rt.clock.set(when)
    if day is not None:
        actions.trigger(rt, "app-daily", day=day)
    drain(Worker(rt, "w"))


def test_days_triggered_out_of_order_each_hold_their_own_commits(store_url: str, tmp_path: Path,
                                                                 runtime: RuntimeFactory) -> None:
    """Trigger the third day, then the first, then the second: each report holds the commits of its day."""
    repo = make_repo(tmp_path)
    repo.commit("base", at=at(-3, 9))
    days = {d: [repo.commit(f"day {d} #{n}", at=at(d, 8 + n)) for n in range(d + 2)] for d in (0, 1, 2)}
    rt = app_daily_runtime(runtime, store_url, tmp_path, repo)
    for day in (2, 0, 1):
        work(rt, at(3, 20), date(2026, 11, 2 + day))
    got = reports(rt)
    for day, shas in days.items():  # an interval window: the 19:30 slot of the day ends it
        key = f"2026-11-0{2 + day}"
        assert sorted(c["sha"] for c in got[key]["commits"]) == sorted(shas), key
        assert not got[key]["covered"] and got[key]["also_covers"] == []


def test_a_failed_day_keeps_its_commits_for_its_retry(store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    """A day whose COLLECT_GIT failed is not overtaken by the next day's run: its retry holds its own commits."""
    repo = make_repo(tmp_path)
    repo.commit("base", at=at(-3, 9))
    rt = app_daily_runtime(runtime, store_url, tmp_path, repo)
    first = repo.commit("monday", at=at(0, 9))
    work(rt, at(0, 20), date(2026, 11, 2))
    tuesday = repo.commit("tuesday", at=at(1, 9))
    head = repo.path / ".git" / "HEAD"
    head.rename(head.with_name("HEAD.away"))  # the repository is unreadable while Tuesday runs: it fails
    work(rt, at(1, 20), date(2026, 11, 3))
    (failed,) = [r for r in run_rows_list(rt) if r.business_key == "2026-11-03"]
    assert failed.status in (RunStatus.FAILED, RunStatus.RETRY_PENDING), failed.status
    head.with_name("HEAD.away").rename(head)
    wednesday = repo.commit("wednesday", at=at(2, 9))
    work(rt, at(2, 20), date(2026, 11, 4))
    if failed.status is RunStatus.FAILED:
        actions.retry(rt, failed.id)
    work(rt, at(2, 23))
    got = reports(rt)
    assert [c["sha"] for c in got["2026-11-02"]["commits"]] == [first]
    assert [c["sha"] for c in got["2026-11-03"]["commits"]] == [tuesday]
    assert [c["sha"] for c in got["2026-11-04"]["commits"]] == [wednesday]


def test_days_too_old_to_record_are_held_by_the_first_report_after_them(store_url: str, tmp_path: Path,
                                                                        runtime: RuntimeFactory) -> None:
    """Off for six days with a two-day catch-up window: the slots older than it get no row at all (the tick
    audits their range); the first report after the outage still holds their commits and names them."""
    repo = make_repo(tmp_path)
    repo.commit("base", at=at(-3, 9))
    rt = app_daily_runtime(runtime, store_url, tmp_path, repo, catchup_window="2d")
    cycle(rt, at(0, 19, 31))
    during = [repo.commit(f"day {d}", at=at(d, 12)) for d in range(1, 7)]
    cycle(rt, at(7, 19, 31))
    got = reports(rt)
    assert sorted(c["sha"] for c in got["2026-11-09"]["commits"]) == sorted(during)
    assert got["2026-11-09"]["also_covers"] == [f"2026-11-0{d}" for d in range(3, 9)]
    with rt.store.read() as conn:
        keys = {r.business_key for r in run_rows.list_runs(conn)}
    assert "2026-11-03" not in keys  # too old to record: no row, yet named


def run_rows_list(rt: Runtime) -> list[Any]:
    with rt.store.read() as conn:
        return run_rows.list_runs(conn)


def test_a_commit_forced_away_and_back_is_held_once_whatever_runs_afterwards(store_url: str, tmp_path: Path,
                                                                             runtime: RuntimeFactory) -> None:
    """A commit force-pushed away, then back, then backfills of the days before it: the report
    that saw it come back holds it, and no backfill of an earlier day holds it again."""
    repo = make_repo(tmp_path)
    base = repo.commit("base", at=at(-7, 9))
    rt = app_daily_runtime(runtime, store_url, tmp_path, repo)
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
    for key in ("2026-11-07", "2026-11-02"):
        assert held[key] == [] and got[key]["covered_by"] == "2026-11-08"
