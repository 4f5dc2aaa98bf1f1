"""One Ollama chat for the report writer, the schedule drafter and the ops summary, against the
loopback fake driven by the real ``ollama`` package: the same failure gives the same error code,
and each of them retries a passing failure within its budget."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from engine.core import errors
from engine.core.models import PeriodKind
from engine.plugins.contract import DraftRequest, StepContext
from steps import ollama_chat
from steps.ollama_writer import OllamaWriter
from tests.fakes.fake_ollama import DEFAULT_MODEL, FakeOllama
from workflows import drafting, ops_report
from workflows.report_settings import LlmSettings, ProjectSettings, ReportSettings

FACTS = {"start": "s", "end": "e", "as_of": "a", "schedules": [],
         "failures": [], "stalled": [], "backfills": [], "unrun": [], "changes": []}
DRAFT = {"name": "web-daily", "workflow": "daily_report", "project": "web", "cron": "0 18 * * *",
         "timezone": "UTC", "rationale": "every day at six"}


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


def settings(fake: FakeOllama) -> ReportSettings:
    return ReportSettings(llm=LlmSettings(provider="ollama", host=fake.url, retry_budget=timedelta(seconds=0.2),
                                          timeout=timedelta(seconds=10)),
                          projects=[ProjectSettings(key="web")])


def write_report(fake: FakeOllama) -> str:
    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, sleep=lambda s: None,
                          retry=ollama_chat.RetryPolicy.within(0.2))
    return writer.write("prompt", system="system", options={}, material=None).text  # type: ignore[arg-type]


def draft_schedule(fake: FakeOllama) -> str:
    request = DraftRequest(text="every day at six", project="web", workflow="daily_report",
                           workflows={"daily_report": PeriodKind.DAY})
    return drafting.draft(settings(fake), request).rationale


def summarise_ops(fake: FakeOllama) -> str:
    at = datetime(2026, 9, 29, tzinfo=UTC)
    ctx = StepContext(run_id=1, workflow="ops_daily_report", project="", idempotency_key="ops:k", business_key="k",
                      revision=1, scheduled_for=at, period_start_at=at, period_end_at=at, timezone="UTC", attempt=1,
                      pinned={"provider": "ollama", "model": DEFAULT_MODEL, "text_rules": 2},
                      outputs={"COLLECT_FACTS": {"facts": FACTS}}, settings=settings(fake),
                      check_fence=lambda: None, sleep=lambda s: None)
    return str(ops_report.write("daily", ctx).output["text"])  # type: ignore[index]


CALLERS: dict[str, tuple[Callable[[FakeOllama], str], str]] = {
    "writer": (write_report, "The team moved the project forward."),
    "drafter": (draft_schedule, "every day at six"),
    "ops summary": (summarise_ops, "The queue was quiet."),
}


def answer(fake: FakeOllama, caller: str) -> None:
    if caller == "drafter":
        fake.replies([json.dumps(DRAFT)])
    elif caller == "ops summary":
        fake.replies([json.dumps({"summary": "The queue was quiet."})])


@pytest.mark.parametrize("caller", CALLERS)
def test_a_passing_server_error_is_retried_by_every_caller(fake: FakeOllama, caller: str) -> None:
    ask, expected = CALLERS[caller]
    answer(fake, caller)
    fake.script("/api/chat", [(503, {"error": "loading model"}, 0.0)])
    assert expected in ask(fake)
    assert len(fake.requests_to("/api/chat")) == 2


@pytest.mark.parametrize(("status", "code"), [(500, "MODEL_UNAVAILABLE"), (400, "CONFIG_INVALID"),
                                              (404, "MODEL_UNAVAILABLE")])
@pytest.mark.parametrize("caller", CALLERS)
def test_the_same_failure_is_the_same_error_for_every_caller(fake: FakeOllama, caller: str, status: int,
                                                             code: str) -> None:
    ask, _ = CALLERS[caller]
    fake.script("/api/chat", [(status, {"error": "no"}, 0.0)] * 50)
    with pytest.raises(errors.StepError) as caught:
        ask(fake)
    assert caught.value.code == code
    assert f"ollama at {fake.url}" in caught.value.message
    if status == 404:
        assert f"(run: ollama pull {DEFAULT_MODEL})" in caught.value.message
    if status == 400:
        assert len(fake.requests_to("/api/chat")) == 1  # a malformed request is not sent again


def test_the_doctor_check_names_a_server_that_is_down_as_the_steps_do() -> None:
    with FakeOllama() as gone:
        url = gone.url
    probe = ollama_chat.check(url, DEFAULT_MODEL, 2.0)
    assert not probe.healthy
    assert f"ollama at {url} is not reachable" in probe.detail and "`ollama serve`" in probe.detail
