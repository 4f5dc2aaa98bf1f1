"""The report workflows end to end, in-process: a real git repository, the fake Ollama and Notion."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engine.core.models import Run, RunStatus, StepStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.runtime import Runtime
from engine.store import run_rows
from tests.fakes.fake_notion import FakeNotion
from tests.fakes.fake_ollama import FakeOllama, closed_port
from tests.fakes.gitrepo import GitRepo, make_repo
from tests.support import ManualRuntime, RuntimeFactory, output_of, run_next

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)  # 10:00 in Seoul on the 30th
TOKEN = "secret_test_token"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = make_repo(tmp_path)
    repo.commit("before midnight (28th)", at=datetime(2026, 9, 28, 23, 59, tzinfo=SEOUL))
    repo.commit("first of the day", at=datetime(2026, 9, 29, 0, 0, 30, tzinfo=SEOUL),
                files={"engine/a.py": "a = 1\n"})
    repo.commit("afternoon", at=datetime(2026, 9, 29, 15, 0, tzinfo=SEOUL), files={"steps/b.py": "b = 2\n"})
    repo.commit("just before midnight", at=datetime(2026, 9, 29, 23, 59, 59, tzinfo=SEOUL),
                files={"engine/a.py": "a = 3\n"})
    repo.commit("after midnight (30th)", at=datetime(2026, 9, 30, 0, 0, 1, tzinfo=SEOUL))
    return repo


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    fake = FakeOllama().start()
    yield fake
    fake.stop()


@pytest.fixture
def notion() -> Iterator[FakeNotion]:
    with FakeNotion(token=TOKEN) as fake:
        yield fake


def platform_runtime(runtime: RuntimeFactory, url: str, tmp_path: Path, repo: GitRepo, *,
                     llm: dict[str, Any] | None = None, notion: FakeNotion | None = None,
                     workflow: str = "daily_report", cron: str = "0 3 * * *", on_empty: str = "skip",
                     language: str = "en", exclude: list[str] | None = None) -> ManualRuntime:
    """The ``platform`` project's report schedule (Seoul time) applied a day before ``NOW``, the clock at ``NOW``."""
    extra: dict[str, Any] = {
        "projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"], "on_empty": on_empty,
                      "exclude": exclude or []}],
        "reports": {"dir": str(tmp_path / "reports"), "language": language},
        "llm": {"provider": "builtin", "retry_budget": "0.2s", **(llm or {})},
        "worker": {"retry_backoff": "1m"},
    }
    if notion is not None:
        extra["notion"] = {"enabled": True, "token_env": "RF_TEST_NOTION", "database_id": notion.database_id,
                           "base_url": notion.url, "retry_budget": "0.3s", "timeout": "5s"}
    spec = dict(name="platform-report", workflow=workflow, project="platform", cron=cron, timezone="Asia/Seoul")
    rt = runtime(url, schedules=[spec], at=NOW - timedelta(days=1), config=extra, apply=True)
    rt.clock.set(NOW)
    return rt


def show(rt: Runtime, run_id: int) -> Run:
    with rt.store.read() as conn:
        return run_rows.get_run(conn, run_id)


def front_matter(path: Path) -> dict[str, str]:
    head = path.read_text().split("---\n")[1]
    return dict(line.split(": ", 1) for line in head.splitlines() if ": " in line and not line.startswith(" "))


def test_daily_run_writes_the_file_and_one_page(store_url: str, tmp_path: Path, repo: GitRepo, ollama: FakeOllama,
                                                notion: FakeNotion, monkeypatch: pytest.MonkeyPatch,
                                                runtime: RuntimeFactory) -> None:
    monkeypatch.setenv("RF_TEST_NOTION", TOKEN)
    rt = platform_runtime(runtime, store_url, tmp_path, repo, llm={"provider": "ollama", "host": ollama.url},
                          notion=notion)
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    outcome = Worker(rt, "w").run_one()
    assert outcome is not None and outcome.status is RunStatus.SUCCESS, outcome
    run = show(rt, result.run_id)
    commits = output_of(run, 0)["commits"]
    assert [c["subject"] for c in commits] == ["first of the day", "afternoon", "just before midnight"]
    # The branch as it stood at the window's end (the 30th's first commit landed after it).
    assert run.pinned["head_sha"] == repo.head("main~1")
    path = tmp_path / "reports" / "platform" / "2026-09-29-platform-daily-summary.md"
    meta = front_matter(path)
    assert meta["report_key"] == '"daily_report:platform:2026-09-29"'
    assert meta["window_start"] == f'"{run.pinned["window_start"]}"' == '"2026-09-28T15:00:00Z"'
    assert meta["window_end"] == '"2026-09-29T15:00:00Z"'
    assert meta["prompt_version"] == '"v4"' and meta["grounding"] == '"ok"' and meta["model"] == '"llama3.1:8b"'
    assert repo.head("main~1") in path.read_text()
    assert ollama.generations == 1
    (page,) = notion.live_pages("daily_report:platform:2026-09-29")
    kinds = {a.kind: a for a in run.artifacts}
    assert set(kinds) == {"markdown", "notion_page"}
    assert kinds["notion_page"].external_id == page["id"]
    assert kinds["markdown"].location.endswith(str(path))


def test_a_retry_reproduces_the_pinned_inputs(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                              runtime: RuntimeFactory) -> None:
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"prompt_version": "v1"})
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    Worker(rt, "w").run_one()
    first = (tmp_path / "reports/platform/2026-09-29-platform-daily-summary.md").read_bytes()
    # A late commit authored inside the window, and a new prompt version in the config.
    repo.commit("late but inside the window", at=datetime(2026, 9, 29, 12, 0, tzinfo=SEOUL))
    rt2 = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"prompt_version": "v2"})
    actions.retry(rt2, result.run_id, from_step="COLLECT_GIT")
    assert run_next(Worker(rt2, "w")).status is RunStatus.SUCCESS
    run = show(rt2, result.run_id)
    assert "late but inside the window" not in [c["subject"] for c in output_of(run, 0)["commits"]]
    assert run.pinned["prompt_version"] == "v1"
    assert (tmp_path / "reports/platform/2026-09-29-platform-daily-summary.md").read_bytes() == first
    assert sorted(p.name for p in (tmp_path / "reports/platform").iterdir()) == [
        "2026-09-29-platform-daily-summary.md"]


def test_notion_down_then_retry_runs_only_the_upload(sqlite_url: str, tmp_path: Path, repo: GitRepo, ollama: FakeOllama,
                                                     notion: FakeNotion, monkeypatch: pytest.MonkeyPatch,
                                                     runtime: RuntimeFactory) -> None:
    monkeypatch.setenv("RF_TEST_NOTION", TOKEN)
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": ollama.url},
                          notion=notion)
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    notion.fail_next(1000, 500)
    outcome = Worker(rt, "w").run_one()
    assert outcome is not None and outcome.status is RunStatus.RETRY_PENDING
    assert outcome.error_code == "NOTION_UNAVAILABLE"
    run = show(rt, result.run_id)
    assert [s.status for s in run.steps] == [StepStatus.SUCCESS] * 3 + [StepStatus.FAILED, StepStatus.PENDING]
    assert run.not_before is not None and run.not_before > rt.clock.now()
    notion.heal()
    actions.retry(rt, result.run_id)
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert ollama.generations == 1
    assert len(notion.live_pages("daily_report:platform:2026-09-29")) == 1
    run = show(rt, result.run_id)
    assert [a.from_step for a in run.attempts] == ["COLLECT_GIT", "UPLOAD_NOTION"]
    assert [s.attempts for s in run.steps] == [1, 1, 1, 2, 1]  # DELIVER: skipped, no [[deliveries]]


def test_ollama_down_is_model_unavailable_then_completes(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                         runtime: RuntimeFactory) -> None:
    port = closed_port()
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo,
                          llm={"provider": "ollama", "host": f"http://127.0.0.1:{port}"})
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    outcome = Worker(rt, "w").run_one()
    assert outcome is not None and outcome.status is RunStatus.RETRY_PENDING
    run = show(rt, result.run_id)
    assert run.error_code == "MODEL_UNAVAILABLE" and f"127.0.0.1:{port}" in (run.error_message or "")
    fake = FakeOllama().start()
    try:
        rt2 = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": fake.url})
        rt2.clock.set(NOW + timedelta(minutes=2))
        assert run_next(Worker(rt2, "w")).status is RunStatus.SUCCESS
        assert fake.generations == 1
    finally:
        fake.stop()
    assert show(rt2, result.run_id).attempt_count == 2


def test_weekly_run_covers_monday_to_monday_local(sqlite_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    repo = make_repo(tmp_path)
    repo.commit("sunday before", at=datetime(2026, 9, 27, 23, 59, tzinfo=SEOUL))
    repo.commit("monday 00:00", at=datetime(2026, 9, 28, 0, 0, tzinfo=SEOUL))
    repo.commit("sunday 23:59", at=datetime(2026, 10, 4, 23, 59, 59, tzinfo=SEOUL))
    repo.commit("next monday", at=datetime(2026, 10, 5, 0, 0, tzinfo=SEOUL))
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, workflow="weekly_report", cron="0 9 * * 1")
    rt.clock.set(datetime(2026, 10, 6, 0, 0, tzinfo=UTC))
    result = actions.trigger(rt, "platform-report", day=date(2026, 10, 1))
    assert result.business_key == "2026-W40"
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    run = show(rt, result.run_id)
    assert run.pinned["window_start"] == "2026-09-27T15:00:00Z"  # Monday 28th 00:00 KST
    assert run.pinned["window_end"] == "2026-10-04T15:00:00Z"
    assert [c["subject"] for c in output_of(run, 0)["commits"]] == ["monday 00:00", "sunday 23:59"]
    assert (tmp_path / "reports/platform/2026-W40-platform-weekly-summary.md").exists()


def test_an_empty_window_is_skipped_without_a_file(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                   runtime: RuntimeFactory) -> None:
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo)
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 20))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    run = show(rt, result.run_id)
    assert [s.status for s in run.steps] == [StepStatus.SUCCESS] + [StepStatus.SKIPPED] * 4
    assert all(s.error_message == "no_activity" for s in run.steps[1:])
    assert not (tmp_path / "reports").exists()


def test_an_empty_window_with_on_empty_report_writes_a_short_report(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                                    runtime: RuntimeFactory) -> None:
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, on_empty="report")
    actions.trigger(rt, "platform-report", day=date(2026, 9, 20))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    text = (tmp_path / "reports/platform/2026-09-20-platform-daily-summary.md").read_text()
    assert re.search(r"no (commits|activity)", text, re.IGNORECASE)


def test_force_new_revision_gets_its_own_file_and_page(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                       notion: FakeNotion, monkeypatch: pytest.MonkeyPatch,
                                                       runtime: RuntimeFactory) -> None:
    monkeypatch.setenv("RF_TEST_NOTION", TOKEN)
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, notion=notion)
    actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    Worker(rt, "w").run_one()
    forced = actions.trigger(rt, "platform-report", day=date(2026, 9, 29), force_new=True)
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    names = sorted(p.name for p in (tmp_path / "reports/platform").iterdir())
    assert names == ["2026-09-29-platform-daily-summary.md", "2026-09-29-platform-daily-summary.r2.md"]
    assert len(notion.live_pages("daily_report:platform:2026-09-29")) == 1
    assert len(notion.live_pages("daily_report:platform:2026-09-29#2")) == 1
    assert show(rt, forced.run_id).idempotency_key == "daily_report:platform:2026-09-29#2"


@pytest.mark.parametrize("legacy", [True, False], ids=["pinned-by-the-previous-release", "pinned-en"])
def test_a_run_created_before_the_language_change_keeps_english_on_retry(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                                         legacy: bool, runtime: RuntimeFactory) -> None:
    from sqlalchemy import update

    from engine.store.tables import runs

    down = f"http://127.0.0.1:{closed_port()}"
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo,
                          llm={"provider": "ollama", "host": down, "prompt_version": "v1"})
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    assert run_next(Worker(rt, "w")).status is RunStatus.RETRY_PENDING
    if legacy:  # rows written before the language existed pinned none
        pinned = dict(show(rt, result.run_id).pinned)
        assert pinned.pop("language") == "en"
        with rt.store.write() as conn:
            conn.execute(update(runs).where(runs.c.id == result.run_id).values(pinned=pinned))
    fake = FakeOllama().start()
    try:
        rt2 = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": fake.url},
                               language="ko")
        rt2.clock.set(NOW + timedelta(minutes=2))
        assert run_next(Worker(rt2, "w")).status is RunStatus.SUCCESS
        [chat] = fake.requests_to("/api/chat")
    finally:
        fake.stop()
    system = chat.body["messages"][0]["content"]
    assert system.endswith("Write in English.") and "Korean" not in system
    text = (tmp_path / "reports/platform/2026-09-29-platform-daily-summary.md").read_text()
    assert "# Daily report: platform, 2026-09-29" in text and "## Statistics" in text and "## 통계" not in text
    run = show(rt2, result.run_id)
    assert run.pinned["prompt_version"] == "v1" and run.pinned.get("language", "en") == "en"
    assert output_of(run, 1)["language"] == "en"


def test_a_new_run_pins_the_configured_language(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                runtime: RuntimeFactory) -> None:
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, language="ko-KR")
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    run = show(rt, result.run_id)
    assert (run.pinned["language"], run.pinned["prompt_version"]) == ("ko", "v4")
    text = (tmp_path / "reports/platform/2026-09-29-platform-daily-summary.md").read_text()
    assert "# 일일 업무 보고: platform, 2026-09-29" in text and "## 영역별 변경 사항" in text


def test_exclude_globs_are_pinned_and_leave_the_statistics(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                           runtime: RuntimeFactory) -> None:
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, exclude=["steps/"])
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    run = show(rt, result.run_id)
    assert run.pinned["exclude"] == ["steps/"]
    statistics = (tmp_path / "reports/platform/2026-09-29-platform-daily-summary.md").read_text().split(
        "## Statistics")[1]
    assert "| engine |" in statistics and "| steps |" not in statistics
    assert "| 3 | 1 | 1 |" in statistics  # three commits, one author, one counted file (engine/a.py)


def test_a_commit_git_cannot_parse_is_left_out_and_named_in_the_report(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                                       runtime: RuntimeFactory) -> None:
    """Issue 36, item 5: a NUL in an author header crashed COLLECT_GIT three times, then FAILED, for good."""
    # On the branch as it stood at the 29th's end: the 30th's first commit is not pushed yet.
    repo.git("reset", "-q", "--hard", "HEAD~1")
    corrupt = repo.corrupt_commit("from a broken tool", at=datetime(2026, 9, 29, 12, 0, tzinfo=SEOUL))
    repo.commit("on top of it", at=datetime(2026, 9, 29, 13, 0, tzinfo=SEOUL))
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo)
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    outcome = Worker(rt, "w").run_one()
    assert outcome is not None and outcome.status is RunStatus.SUCCESS, outcome
    run = show(rt, result.run_id)
    collected = output_of(run, 0)
    assert run.steps[0].attempts == 1 and collected["unreadable"] == [corrupt]
    assert "on top of it" in [c["subject"] for c in collected["commits"]]
    text = (tmp_path / "reports/platform/2026-09-29-platform-daily-summary.md").read_text()
    assert f"> **Note:** 1 commit could not be read by git and was left out: `{corrupt}` (see `git fsck`)." in text
