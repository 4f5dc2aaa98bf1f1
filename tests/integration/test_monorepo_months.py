"""A monorepo reported by month: two sub-projects of one repository (``paths``), Conventional Commits, and a
branch not merged yet. Each sub-project's monthly reports hold exactly the commits that changed it, each in its
own month (an oracle from plain ``git log -- PATH``); a commit touching both is in each, and once in the team's
report, named as shared; kinds match what is written here by hand; areas are named below each root; the
unmerged branch is listed in progress and counted nowhere."""

from __future__ import annotations

import subprocess
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.scheduling import definitions
from engine.store import run_rows
from tests.fakes.gitrepo import GitRepo, make_repo
from tests.support import make_runtime, output_of

ALICE = ("Alice Kim", "alice@example.com")
BOB = ("Bob Lee", "bob@example.com")


def at(month: int, day: int) -> datetime:
    return datetime(2026, month, day, 12, tzinfo=UTC)


def build(tmp_path: Path) -> GitRepo:
    repo = make_repo(tmp_path)
    repo.commit("chore: scaffold", at=at(9, 20), files={"README.md": "mono\n"})
    repo.commit("feat(api): orders endpoint", at=at(10, 3), files={"services/api/handlers/orders.py": "o\n"})
    repo.commit("fix(web): cart rounding", at=at(10, 9), files={"services/web/cart/total.js": "t\n"}, author=BOB)
    repo.commit("feat!: one schema for api and web", at=at(10, 20),
                files={"services/api/schema.py": "s\n", "services/web/schema.js": "s\n"})
    repo.commit("docs(api): orders guide", at=at(11, 4), files={"services/api/docs/orders.md": "g\n"})
    repo.commit("perf(web): lazy images", at=at(11, 12), files={"services/web/img/lazy.js": "l\n"}, author=BOB)
    repo.commit("ci: cache the node modules", at=at(11, 15), files={".github/workflows/ci.yml": "c\n"})
    repo.checkout("feature/refunds", create=True)
    repo.commit("feat(api): refunds", at=at(11, 20), files={"services/api/handlers/refunds.py": "r\n"}, author=BOB)
    repo.checkout("main")
    return repo


def oracle(repo: GitRepo, folder: str) -> dict[str, set[str]]:
    """Plain git: the commits of main that changed ``folder``, by the UTC month they were committed in."""
    out: dict[str, set[str]] = {}
    rows = subprocess.run(["git", "log", "--format=%H %cI", "main", "--", folder], cwd=repo.path, check=True,
                          capture_output=True, text=True).stdout.split("\n")
    for row in filter(None, rows):
        sha, when = row.split()
        out.setdefault(when[:7], set()).add(sha)
    return out


def test_two_sub_projects_by_month_with_kinds_shared_commits_and_work_in_progress(sqlite_url: str,
                                                                                  tmp_path: Path) -> None:
    repo = build(tmp_path)
    project = {"repo": str(repo.path), "branches": ["main"], "on_empty": "report", "wip_branches": ["*"]}
    extra: dict[str, Any] = {
        "projects": [{"key": "api", "paths": ["services/api/"], **project},
                     {"key": "web", "paths": ["services/web"], **project}],
        "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"},
    }
    monthly = dict(workflow="monthly_report", cron="0 3 1 * *", timezone="UTC", attribution="landed")
    sprints = dict(workflow="sprint_report", cron="0 3 * * 1", timezone="UTC", attribution="landed",
                   sprint={"length": "28d", "anchor": "2026-09-28"})  # four-week sprints from Monday 28 September
    schedules: list[dict[str, Any]] = [
        dict(name="api-monthly", project="api", **monthly), dict(name="web-monthly", project="web", **monthly),
        dict(name="mono-monthly", workflow="team_monthly_report", project="mono", projects=["api", "web"],
             cron="0 4 1 * *", timezone="UTC"),
        dict(name="api-sprint", project="api", **sprints), dict(name="web-sprint", project="web", **sprints)]
    rt = make_runtime(sqlite_url, schedules=schedules, clock=ManualClock(datetime(2026, 12, 2, tzinfo=UTC)),
                      extra=extra)
    definitions.apply(rt)
    for name in ("api-monthly", "web-monthly", "mono-monthly"):
        actions.backfill(rt, name, first=date(2026, 10, 1), last=date(2026, 11, 30))
    for name in ("web-sprint", "api-sprint"):  # the sprints of 28 Sep, 26 Oct and 23 Nov (its end: 21 Dec)
        actions.backfill(rt, name, first=date(2026, 9, 28), last=date(2026, 11, 22))
    worker = Worker(rt, "w")
    while (outcome := worker.run_one()) is not None:
        assert outcome.status in (RunStatus.SUCCESS, RunStatus.WAITING), outcome
    with rt.store.read() as conn:
        runs = [run_rows.get_run(conn, r.id) for r in run_rows.list_runs(conn, limit=None)]
    assert {r.status for r in runs} == {RunStatus.SUCCESS}
    held = {(r.project, r.business_key): r for r in runs if r.workflow == "monthly_report"}
    in_sprints = {(r.project, r.business_key): {c["sha"] for c in output_of(r, 0)["commits"]}
                  for r in runs if r.workflow == "sprint_report"}
    for key, folder in (("api", "services/api"), ("web", "services/web")):  # each commit in its sprint's report
        rows = subprocess.run(["git", "log", "--format=%H %cI", "main", "--", folder], cwd=repo.path, check=True,
                              capture_output=True, text=True).stdout.split()
        by_sprint: dict[str, set[str]] = {}
        for sha, when in zip(rows[::2], rows[1::2], strict=True):
            start = (date.fromisoformat(when[:10]) - date(2026, 9, 28)).days // 28
            by_sprint.setdefault(f"2026-S{[10, 11, 12][start]:02d}", set()).add(sha)
        assert {k: v for (p, k), v in in_sprints.items() if p == key} == {
            k: by_sprint.get(k, set()) for k in ("2026-S10", "2026-S11")}, key
    for key, folder in (("api", "services/api"), ("web", "services/web")):
        expected = oracle(repo, folder)
        for month in ("2026-10", "2026-11"):
            got = {c["sha"] for c in output_of(held[(key, month)], 0)["commits"]}
            assert got == expected.get(month, set()), (key, month)
    shared = next(sha for sha in oracle(repo, "services/api")["2026-10"] if sha in oracle(repo, "services/web")["2026-10"])

    def text(key: str, month: str) -> str:
        return str(output_of(held[(key, month)], 1)["text"])

    def kinds(key: str, month: str) -> dict[str, int]:
        return dict(output_of(held[(key, month)], 1)["stats"]["kinds"])

    assert kinds("api", "2026-10") == {"breaking": 1, "features": 1}
    assert kinds("web", "2026-10") == {"breaking": 1, "fixes": 1}
    assert kinds("api", "2026-11") == {"docs": 1} and kinds("web", "2026-11") == {"performance": 1}
    assert "| handlers | 1 |" in text("api", "2026-10") and "services" not in text("api", "2026-10").split(
        "### Areas", 1)[1].split("###", 1)[0]  # areas below the root
    refunds = text("api", "2026-11").split("## In progress\n", 1)[1].split("\n## ", 1)[0]
    assert "`feature/refunds` (Bob Lee): 1 commit not merged yet" in refunds
    every = [c["sha"] for r in held.values() for c in output_of(r, 0)["commits"]]
    assert all("refunds" not in c["subject"] for r in held.values() for c in output_of(r, 0)["commits"])
    assert every.count(shared) == 2  # in each sub-project's report of its month
    team = next(r for r in runs if r.workflow == "team_monthly_report" and r.business_key == "2026-10")
    team_text = str(output_of(team, 1)["text"])
    assert output_of(team, 1)["stats"]["commits"] == 3  # the shared commit once: 1 + 1 + 1
    assert "1 commit changed more than one of api, web" in team_text
    # A month carries its weeks, as a weekly its days: api's October, by ISO week (3 and 20 October).
    assert "- **Week by week** (commits by author date): W40 1 · W41 0 · W42 0 · W43 1 · W44 0" in text("api", "2026-10")
