"""Work in progress (layout 5): a branch not merged yet is listed apart in each day's report while it grows,
never counted there; merged, its commits land once, in that day's report, and never twice."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.scheduling import definitions
from engine.store import run_rows
from tests.fakes.gitrepo import make_repo
from tests.support import make_runtime, output_of

BOB = ("Bob Lee", "bob@example.com")
DAY0 = date(2026, 9, 27)


def at(n: int, hour: int) -> datetime:
    """``hour`` o'clock UTC, ``n`` days after 27 September."""
    return datetime(DAY0.year, DAY0.month, DAY0.day, hour, tzinfo=UTC) + timedelta(days=n)


def test_a_branch_in_progress_three_days_then_merged_lands_once(sqlite_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("Start", at=at(0, 9), files={"app.py": "a = 0\n"})
    extra: dict[str, Any] = {
        "projects": [{"key": "shop", "repo": str(repo.path), "branches": ["main"], "on_empty": "report",
                      "wip_branches": ["*"]}],
        "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"},
    }
    spec = dict(name="shop-daily", workflow="daily_report", project="shop", cron="0 3 * * *", timezone="UTC",
                attribution="landed")
    rt = make_runtime(sqlite_url, schedules=[spec], clock=ManualClock(at(0, 12)), extra=extra)
    definitions.apply(rt)
    texts: dict[int, str] = {}
    landed: dict[int, list[str]] = {}

    def report(n: int) -> None:  # on time: the next day at 03:01, the repository as it stands then
        rt.clock.set(at(n + 1, 3) + timedelta(minutes=1))
        result = actions.trigger(rt, "shop-daily", day=DAY0 + timedelta(days=n))
        outcome = Worker(rt, "w").run_one()
        assert outcome is not None and outcome.status is RunStatus.SUCCESS
        with rt.store.read() as conn:
            run = run_rows.get_run(conn, result.run_id)
        texts[n] = str(output_of(run, 1)["text"])
        landed[n] = [c["sha"] for c in output_of(run, 0)["commits"]]

    branch = []
    for n in (1, 2, 3):  # Bob's branch grows a commit a day; main gets one of its own
        repo.checkout("feature/pay", create=n == 1)
        branch.append(repo.commit(f"Payments step {n}", at=at(n, 10), files={f"pay{n}.py": "p\n"}, author=BOB))
        repo.checkout("main")
        repo.commit(f"Main work {n}", at=at(n, 11), files={"app.py": f"a = {n}\n"})
        report(n)
        section = texts[n].split("## In progress\n", 1)[1].split("\n## ", 1)[0]
        assert f"`feature/pay` (Bob Lee): {n} commit{'s' if n > 1 else ''} not merged yet" in section
        assert branch[-1][:8] in section
        assert not set(landed[n]) & set(branch), n  # listed apart, never counted
    repo.merge("feature/pay", at=at(4, 9), message="Merge pull request #7 from bob/feature-pay")
    report(4)
    assert "## In progress" not in texts[4]  # merged: nothing left in progress
    assert set(branch) <= set(landed[4]) and "Merge pull request #7" in texts[4]
    every = [sha for n in landed for sha in landed[n]]
    assert all(every.count(sha) == 1 for sha in branch)  # landed once, never twice
