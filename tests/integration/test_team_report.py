"""Team reports (SPEC §17) in-process on SQLite and PostgreSQL: one child per project, one report, one file.

A project whose repository is missing makes its child FAILED (GIT_REPO_NOT_FOUND);
the report names it and the parent ends PARTIAL_SUCCESS; once the repository is
back, ``runs retry`` collects that project only.
"""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.plugins.workflow_registry import load_registry
from engine.scheduling import definitions
from engine.store import outbox, run_rows
from tests.fakes.fake_notion import FakeNotion
from tests.fakes.fake_ollama import FakeOllama
from tests.fakes.gitrepo import make_repo
from tests.support import drain, make_runtime
from workflows import team_report

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)
DAY = datetime(2026, 9, 29, 11, 0, tzinfo=SEOUL)


def team_runtime(url: str, tmp_path: Path, **sections: Any):  # type: ignore[no-untyped-def]
    projects = []
    for name, subjects in {"api": ["add the orders endpoint", "fix the retry header"],
                           "web": ["new checkout page"], "docs": ["document the orders endpoint"]}.items():
        repo = make_repo(tmp_path, name)
        for index, subject in enumerate(subjects):
            repo.commit(subject, at=DAY + timedelta(hours=index), files={f"{name}/{index}.txt": subject})
        repo.commit("the day after", at=DAY + timedelta(days=1))
        projects.append({"key": name, "repo": str(repo.path), "branches": ["main"]})
    extra: dict[str, Any] = {"projects": projects,
                             "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"},
                             "worker": {"retry_backoff": "1m"}, **sections}
    spec = dict(name="core-daily", workflow="team_daily_report", project="core", cron="0 3 * * *",
                timezone="Asia/Seoul", projects="*")
    registry = {**load_registry(), "team_daily_report": team_report.DAILY, "team_project": team_report.CHILD}
    rt = make_runtime(url, schedules=[spec], clock=ManualClock(NOW - timedelta(days=1)), registry=registry,
                      extra=extra)
    definitions.apply(rt)
    rt.clock.set(NOW)
    return rt


def test_a_team_report_has_a_summary_and_a_section_per_project(store_url: str, tmp_path: Path) -> None:
    rt = team_runtime(store_url, tmp_path)
    result = actions.trigger(rt, "core-daily", day=date(2026, 9, 29))
    assert drain(Worker(rt, "w")) == [RunStatus.WAITING, *[RunStatus.SUCCESS] * 4]
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, result.run_id)
    assert run.status is RunStatus.SUCCESS and run.pinned["projects"] == ["api", "web", "docs"]
    text = (tmp_path / "reports" / "_team" / "2026-09-29-core-daily-summary.md").read_text()
    summary, projects = text.split("\n## Projects\n")
    assert projects.index("### api") < projects.index("### web") < projects.index("### docs")
    assert "4" in summary  # the overall statistics count every project's commits
    for subject in ("add the orders endpoint", "fix the retry header", "new checkout page",
                    "document the orders endpoint"):
        assert subject in text
    assert "the day after" not in text and "Not collected" not in text


def test_a_missing_repository_costs_one_section_and_retry_collects_only_it(store_url: str, tmp_path: Path) -> None:
    rt = team_runtime(store_url, tmp_path)
    shutil.move(tmp_path / "web", tmp_path / "web-away")
    result = actions.trigger(rt, "core-daily", day=date(2026, 9, 29))
    worker = Worker(rt, "w")
    drain(worker)
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, result.run_id)
        children = {c.project: c for c in run_rows.list_runs(conn, parent_id=run.id)}
    assert run.status is RunStatus.PARTIAL_SUCCESS and "core-daily" not in (run.error_message or "")
    assert children["web"].status is RunStatus.FAILED and children["web"].error_code == "GIT_REPO_NOT_FOUND"
    path = tmp_path / "reports" / "_team" / "2026-09-29-core-daily-summary.md"
    text = path.read_text()
    assert "Not collected: web (GIT_REPO_NOT_FOUND)" in text
    assert "### web\n\n**Not collected** (FAILED, GIT_REPO_NOT_FOUND)" in text
    # One alert for one problem: the team's run_partial, routed by its schedule, naming the child that failed.
    with rt.store.read() as conn:
        raised = [(e.event, e.schedule) for e in outbox.list_events(conn)]
        (partial,) = [e for e in outbox.list_events(conn) if e.event == "run_partial"]
    assert raised == [("run_partial", "core-daily")]
    assert "GIT_REPO_NOT_FOUND" in str(partial.details)
    assert "new checkout page" not in text and "add the orders endpoint" in text

    shutil.move(tmp_path / "web-away", tmp_path / "web")
    actions.retry(rt, run.id)
    assert drain(worker) == [RunStatus.SUCCESS, RunStatus.SUCCESS]  # the web child, then the report
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, result.run_id)
        again = {c.project: c for c in run_rows.list_runs(conn, parent_id=run.id)}
    assert run.status is RunStatus.SUCCESS
    assert {p: c.attempt_count for p, c in again.items()} == {"api": 1, "web": 2, "docs": 1}
    saved = Path(run.steps[2].output["path"])  # a new version beside the first (reports.on_existing)
    assert saved.parent == path.parent and saved != path
    final = saved.read_text()
    assert "new checkout page" in final and "Not collected" not in final


def test_with_ollama_the_summary_is_grounded_on_every_project_and_one_page_is_uploaded(
        sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_NOTION", "secret_team_token")
    with FakeOllama() as ollama, FakeNotion(token="secret_team_token") as notion:
        rt = team_runtime(sqlite_url, tmp_path, llm={"provider": "ollama", "host": ollama.url},
                          notion={"enabled": True, "token_env": "RF_TEST_NOTION", "database_id": notion.database_id,
                                  "base_url": notion.url, "timeout": "5s"})
        result = actions.trigger(rt, "core-daily", day=date(2026, 9, 29))
        drain(Worker(rt, "w"))
        [chat] = ollama.requests_to("/api/chat")
        pages = notion.live_pages("team_daily_report:core:2026-09-29")
    prompt = chat.body["messages"][-1]["content"]
    for subject in ("add the orders endpoint", "fix the retry header", "new checkout page",
                    "document the orders endpoint"):
        assert subject in prompt  # one generation, from all the children's commits
    assert "the day after" not in prompt
    assert len(pages) == 1
    with rt.store.read() as conn:
        assert run_rows.get_run(conn, result.run_id).status is RunStatus.SUCCESS


def test_a_team_from_teams_with_authors_reports_only_their_commits(sqlite_url: str, tmp_path: Path) -> None:
    from tests.fakes.gitrepo import GitRepo

    rt = team_runtime(sqlite_url, tmp_path)
    GitRepo(tmp_path / "api").commit("bob's change", at=DAY + timedelta(hours=5), author=("Bob Lee", "bob@example.com"))
    extra = {"teams": [{"key": "alice", "projects": ["api", "docs"], "authors": ["Alice Kim"]}]}
    spec = dict(name="alice-daily", workflow="team_daily_report", project="alice", cron="0 3 * * *",
                timezone="Asia/Seoul")
    rt2 = make_runtime(sqlite_url, schedules=[spec], clock=rt.clock, registry=rt.registry,
                       extra={**dict(rt.config.raw), **extra, "schedules": [spec]})
    definitions.apply(rt2)
    result = actions.trigger(rt2, "alice-daily", day=date(2026, 9, 29))
    drain(Worker(rt2, "w"))
    with rt2.store.read() as conn:
        run = run_rows.get_run(conn, result.run_id)
    assert run.status is RunStatus.SUCCESS and run.pinned["projects"] == ["api", "docs"]
    text = (tmp_path / "reports" / "_team" / "2026-09-29-alice-daily-summary.md").read_text()
    assert "add the orders endpoint" in text and "bob's change" not in text and "### web" not in text


def test_a_korean_team_report_holds_no_english_fixed_word(store_url: str, tmp_path: Path) -> None:
    rt = team_runtime(store_url, tmp_path, reports={"dir": str(tmp_path / "reports"), "language": "ko"})
    shutil.move(tmp_path / "web", tmp_path / "web-away")  # one project is not collected
    actions.trigger(rt, "core-daily", day=date(2026, 9, 29))
    drain(Worker(rt, "w"))
    text = (tmp_path / "reports" / "_team" / "2026-09-29-core-daily-summary.md").read_text()
    body = text.split("\n---\n", 1)[1]  # the front matter's keys are data, not words of the report
    assert "## 프로젝트" in body and "수집되지 않음: web (GIT_REPO_NOT_FOUND)" in body
    assert "커밋 2개, 작성자:" in body
    english = ("Projects", "Not collected", "No commits", "commits by", "Summary", "Statistics", "Written by",
               "Period", "Activity")
    assert [word for word in english if word in body] == []
