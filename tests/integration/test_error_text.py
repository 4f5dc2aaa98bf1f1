"""Error text is bounded (issue 36, item 4): a model server answering with megabytes that hold an
``@`` and a ``://`` costs the step no time to mask, and what is stored and logged is clipped to
``limits.ERROR_TEXT`` with a marker saying how much was cut."""

from __future__ import annotations

import logging
import time
from datetime import date
from pathlib import Path

import pytest

from engine.core import limits
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from tests.fakes.fake_ollama import FakeOllama
from tests.fakes.gitrepo import GitRepo
from tests.integration.test_report_workflow import platform_runtime, show
from tests.integration.test_report_workflow import repo as repo  # noqa: F401 - the fixture
from tests.support import RuntimeFactory

BODY = "bad gateway from http://proxy.example/ @ " + "E" * 5_000_000  # the probe's shape, 5 MB


@pytest.mark.timeout(120)  # the quadratic mask took hours on this body
def test_a_five_megabyte_error_body_is_masked_at_once_and_stored_clipped(
        sqlite_url: str, tmp_path: Path, repo: GitRepo, caplog: pytest.LogCaptureFixture,
        runtime: RuntimeFactory) -> None:
    with FakeOllama() as model:
        model.script("/api/chat", [(502, BODY, 0.0)] * 20)
        rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": model.url})
        result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
        started = time.perf_counter()
        with caplog.at_level(logging.INFO):
            outcome = Worker(rt, "w").run_one()
        took = time.perf_counter() - started
    assert outcome is not None and outcome.status is RunStatus.RETRY_PENDING
    assert took < 60, f"{took:.1f}s"
    run = show(rt, result.run_id)
    messages = [run.error_message, run.steps[1].error_message, run.attempts[-1].error_message]
    for message in messages:
        assert message is not None and message.startswith("ollama at ")
        assert len(message) <= limits.ERROR_TEXT + 40 and message.endswith("more characters cut]")
    assert all(len(r.getMessage()) < 2 * limits.ERROR_TEXT for r in caplog.records)
