"""DELIVER end to end, in-process: a real repository, a report, and loopback targets (Apprise's ``json://`` as the
chat, a local SMTP server behind ``mailto://``). The receivers' records are the witnesses of what was sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engine.core import errors
from engine.core.deliveries import DeliveryState
from engine.core.models import RunStatus, StepStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.read import run_queries, views
from engine.runtime import Runtime
from tests.fakes import smtp, webhook
from tests.fakes.fake_ollama import closed_port
from tests.fakes.gitrepo import GitRepo, make_repo
from tests.support import ManualRuntime, RuntimeFactory, drain, run_next

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)
DAY = date(2026, 9, 29)
TOKEN = "s3cr3t-hook-token"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = make_repo(tmp_path)
    repo.commit("feat: the first of the day", at=datetime(2026, 9, 29, 9, 0, tzinfo=SEOUL),
                files={"engine/a.py": "a = 1\n"})
    repo.commit("fix: the afternoon", at=datetime(2026, 9, 29, 15, 0, tzinfo=SEOUL), files={"steps/b.py": "b = 2\n"})
    return repo


@pytest.fixture
def hook() -> Iterator[webhook.Webhook]:
    with webhook.serve() as receiver:
        yield receiver


@pytest.fixture
def mailbox() -> Iterator[smtp.Mailbox]:
    with smtp.serve() as box:
        yield box


def chat_url(hook: webhook.Webhook) -> str:
    """The receiver as Apprise's ``json://`` target, with a token in its path (a secret, like a chat's)."""
    return hook.url.replace("http://", "json://") + f"/{TOKEN}"


def delivering_runtime(runtime: RuntimeFactory, url: str, tmp_path: Path, repo: GitRepo, *, to_env: list[str],
                       language: str = "en", timeout: str = "5s") -> ManualRuntime:
    """The ``platform`` daily report delivered to the targets named by the variables ``to_env``, applied a day
    before ``NOW``, the clock at ``NOW``."""
    extra: dict[str, Any] = {
        "projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"]}],
        "reports": {"dir": str(tmp_path / "reports"), "language": language},
        "llm": {"provider": "builtin"},
        "worker": {"retry_backoff": "1m", "max_attempts": 3},
        "deliveries": [{"project": "platform", "to_env": to_env, "timeout": timeout}] if to_env else [],
    }
    spec = dict(name="platform-report", workflow="daily_report", project="platform", cron="0 3 * * *",
                timezone="Asia/Seoul")
    rt = runtime(url, schedules=[spec], at=NOW - timedelta(days=1), config=extra, apply=True)
    rt.clock.set(NOW)
    return rt


def delivered(rt: Runtime, run_id: int) -> dict[str, DeliveryState]:
    return {d.target: d.state for d in run_queries.get_run(rt, run_id).deliveries}


def test_a_report_reaches_a_chat_and_a_mailbox_once(store_url: str, tmp_path: Path, repo: GitRepo,
                                                    hook: webhook.Webhook, mailbox: smtp.Mailbox,
                                                    monkeypatch: pytest.MonkeyPatch, runtime: RuntimeFactory) -> None:
    monkeypatch.setenv("RF_CHAT", chat_url(hook))
    monkeypatch.setenv("RF_MAIL", mailbox.url())
    rt = delivering_runtime(runtime, store_url, tmp_path, repo, to_env=["RF_CHAT", "RF_MAIL"])
    result = actions.trigger(rt, "platform-report", day=DAY)
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    (post,) = hook.received
    assert post.body["title"] == "Daily report: platform, 2026-09-29"
    message = post.body["message"]
    assert "**Covers:**" in message and "2 commits by 1 author" in message  # the report's own first lines
    assert "Features 1 · Fixes 1" in message
    assert "File: " in message and "2026-09-29-platform-daily-summary.md" in message
    (mail,) = mailbox.messages
    assert b"Subject: Daily report: platform, 2026-09-29" in mail
    assert delivered(rt, result.run_id) == {"RF_CHAT": DeliveryState.SENT, "RF_MAIL": DeliveryState.SENT}
    # The same report again (a retry from an earlier step, a regenerate with the same text): nothing is sent.
    actions.retry(rt, result.run_id, from_step="SAVE_MARKDOWN")
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert (len(hook.received), len(mailbox.messages)) == (1, 1)
    # A revision whose report changed (made after the language changed: its report is in Korean): one update each,
    # never a second copy.
    rt = delivering_runtime(runtime, store_url, tmp_path, repo, to_env=["RF_CHAT", "RF_MAIL"], language="ko")
    revision = actions.trigger(rt, "platform-report", day=DAY, force_new=True)
    assert revision.run_id != result.run_id
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert len(hook.received) == 2 and hook.received[1].body["title"].startswith("수정됨: ")
    assert "**활동:**" in hook.received[1].body["message"] and "파일: " in hook.received[1].body["message"]
    assert len(mailbox.messages) == 2
    detail = views.run_detail(run_queries.get_run(rt, revision.run_id), rt.clock.now())
    assert [(d["target"], d["state"], d["kind"]) for d in detail["deliveries"]] == [
        ("RF_CHAT", "SENT", "update"), ("RF_MAIL", "SENT", "update")]
    assert TOKEN not in json.dumps(detail, default=str)  # the URL (its token) is nowhere in what is shown


def test_a_target_that_takes_the_message_and_drops_the_connection_gets_it_once(store_url: str, tmp_path: Path,
                                                                               repo: GitRepo, hook: webhook.Webhook,
                                                                               mailbox: smtp.Mailbox,
                                                                               monkeypatch: pytest.MonkeyPatch,
                                                                               runtime: RuntimeFactory) -> None:
    monkeypatch.setenv("RF_CHAT", chat_url(hook))
    monkeypatch.setenv("RF_MAIL", mailbox.url())
    rt = delivering_runtime(runtime, store_url, tmp_path, repo, to_env=["RF_CHAT", "RF_MAIL"])
    hook.drop_next()
    mailbox.drop_next()
    result = actions.trigger(rt, "platform-report", day=DAY)
    outcome = run_next(Worker(rt, "w"))
    assert outcome.status is RunStatus.PARTIAL_SUCCESS  # said, not hidden: an alert goes with it
    run = run_queries.get_run(rt, result.run_id)
    assert run.error_code == "DELIVERY_UNCONFIRMED"
    assert f"reportflow runs resend {result.run_id}" in (run.error_message or "")
    assert delivered(rt, result.run_id) == {"RF_CHAT": DeliveryState.UNCONFIRMED, "RF_MAIL": DeliveryState.UNCONFIRMED}
    # The run's page lists each target, its state and the command that sends it again; never the URL.
    from tests.integration.test_web_pages import client

    page = client(rt).get(f"/runs/{result.run_id}").text
    assert 'data-delivery="RF_MAIL"' in page and "UNCONFIRMED" in page
    assert f"reportflow runs resend {result.run_id} --target RF_MAIL" in page and TOKEN not in page
    # Retried from DELIVER (by hand, or by anything else): still never sent again by itself.
    actions.retry(rt, result.run_id, from_step="DELIVER")
    assert run_next(Worker(rt, "w")).status is RunStatus.PARTIAL_SUCCESS
    assert (len(hook.received), len(mailbox.messages)) == (1, 1)
    # An operator who looked, and did not find it in the mailbox, sends that one again.
    with pytest.raises(errors.InvalidInput):
        actions.resend(rt, result.run_id, targets=["RF_OTHER"])
    actions.resend(rt, result.run_id, targets=["RF_MAIL"])
    assert run_next(Worker(rt, "w")).status is RunStatus.PARTIAL_SUCCESS  # the chat's is still unconfirmed
    assert (len(hook.received), len(mailbox.messages)) == (1, 2)
    assert delivered(rt, result.run_id) == {"RF_CHAT": DeliveryState.UNCONFIRMED, "RF_MAIL": DeliveryState.SENT}
    actions.resend(rt, result.run_id)
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert (len(hook.received), len(mailbox.messages)) == (2, 2)


def test_a_target_that_answers_429_gets_the_message_once_it_takes_it(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                                     hook: webhook.Webhook,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     runtime: RuntimeFactory) -> None:
    monkeypatch.setenv("RF_CHAT", chat_url(hook))
    rt = delivering_runtime(runtime, sqlite_url, tmp_path, repo, to_env=["RF_CHAT"])
    hook.fail_next(429)
    hook.fail_next(429)
    result = actions.trigger(rt, "platform-report", day=DAY)
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS  # tried again within the step's budget
    assert [r.status for r in hook.received] == [429, 429, 200]  # taken once
    assert delivered(rt, result.run_id) == {"RF_CHAT": DeliveryState.SENT}


def test_a_dribbling_target_is_bounded_by_the_deadline(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                       mailbox: smtp.Mailbox, monkeypatch: pytest.MonkeyPatch,
                                                       runtime: RuntimeFactory) -> None:
    monkeypatch.setenv("RF_MAIL", mailbox.url())
    rt = delivering_runtime(runtime, sqlite_url, tmp_path, repo, to_env=["RF_MAIL"], timeout="1s")
    mailbox.dribble_next(1.0)  # "250 queued" at one byte a second: 12 s
    result = actions.trigger(rt, "platform-report", day=DAY)
    started = datetime.now(UTC)
    assert run_next(Worker(rt, "w")).status is RunStatus.PARTIAL_SUCCESS
    assert datetime.now(UTC) - started < timedelta(seconds=8)
    run = run_queries.get_run(rt, result.run_id)
    assert run.error_code == "DELIVERY_UNCONFIRMED" and "no answer within 1s" in (run.error_message or "")
    assert len(mailbox.messages) == 1


def test_a_target_that_is_down_is_retried_and_gets_the_message_once_it_is_up(sqlite_url: str, tmp_path: Path,
                                                                             repo: GitRepo, hook: webhook.Webhook,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             runtime: RuntimeFactory) -> None:
    monkeypatch.setenv("RF_CHAT", f"json://127.0.0.1:{closed_port()}/{TOKEN}")
    rt = delivering_runtime(runtime, sqlite_url, tmp_path, repo, to_env=["RF_CHAT"])
    result = actions.trigger(rt, "platform-report", day=DAY)
    assert run_next(Worker(rt, "w")).status is RunStatus.RETRY_PENDING
    run = run_queries.get_run(rt, result.run_id)
    assert run.error_code == "DELIVERY_UNAVAILABLE" and "nothing was sent" in (run.error_message or "")
    assert TOKEN not in (run.error_message or "")
    assert [s.status for s in run.steps][:3] == [StepStatus.SUCCESS] * 3
    assert delivered(rt, result.run_id) == {"RF_CHAT": DeliveryState.FAILED}
    # The target comes up; the run's next attempt resumes at DELIVER and sends once.
    monkeypatch.setenv("RF_CHAT", chat_url(hook))
    rt.clock.advance(timedelta(minutes=5))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert len(hook.received) == 1 and delivered(rt, result.run_id) == {"RF_CHAT": DeliveryState.SENT}


def test_an_unset_variable_fails_the_step_naming_it(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                    monkeypatch: pytest.MonkeyPatch, runtime: RuntimeFactory) -> None:
    monkeypatch.delenv("RF_NOWHERE", raising=False)
    rt = delivering_runtime(runtime, sqlite_url, tmp_path, repo, to_env=["RF_NOWHERE"])
    result = actions.trigger(rt, "platform-report", day=DAY)
    assert run_next(Worker(rt, "w")).status is RunStatus.PARTIAL_SUCCESS
    run = run_queries.get_run(rt, result.run_id)
    assert run.error_code == "DELIVERY_TARGET_INVALID" and "RF_NOWHERE" in (run.error_message or "")
    assert run.deliveries == ()  # nothing was tried: the ledger has no row


def test_a_report_with_no_delivery_skips_the_step(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                  runtime: RuntimeFactory) -> None:
    rt = delivering_runtime(runtime, sqlite_url, tmp_path, repo, to_env=[])
    result = actions.trigger(rt, "platform-report", day=DAY)
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    run = run_queries.get_run(rt, result.run_id)
    assert (run.steps[-1].name, run.steps[-1].status) == ("DELIVER", StepStatus.SKIPPED)


def test_a_team_report_reaches_its_team_target_once(sqlite_url: str, tmp_path: Path, hook: webhook.Webhook,
                                                    monkeypatch: pytest.MonkeyPatch, runtime: RuntimeFactory) -> None:
    from tests.integration.test_team_report import team_runtime

    monkeypatch.setenv("RF_TEAM_CHAT", chat_url(hook))
    rt = team_runtime(runtime, sqlite_url, tmp_path,
                      deliveries=[{"team": "core", "to_env": ["RF_TEAM_CHAT"]},
                                  {"schedule": "core-daily", "to_env": ["RF_TEAM_CHAT"]}])
    result = actions.trigger(rt, "core-daily", day=DAY)
    assert drain(Worker(rt, "w"))[-1] is RunStatus.SUCCESS
    (post,) = hook.received  # named by two entries, sent once
    assert "core" in post.body["title"] and "2026-09-29" in post.body["title"]
    assert delivered(rt, result.run_id) == {"RF_TEAM_CHAT": DeliveryState.SENT}
