"""External faults: Ollama, Notion, the repository and the reports directory failing under a real run (SPEC §4, §6).

Each case runs the ``daily_report`` workflow in-process (``engine.execution.worker.Worker``
with a ManualClock, 2 attempts, 1 min backoff) against a real git repository
and the loopback fakes; the in-step retry waits of both clients are the step's
``ctx.sleep`` on the manual clock, recorded as they pass (no patching of tenacity). It ends in the fault's error
code after a bounded number of attempts, leaves no partial file, and says
clearly what happened in ``runs show --json`` (the real CLI).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core import inputs
from engine.execution import lease
from engine.execution.worker import Worker
from engine.operations import actions
from engine.scheduling import definitions
from tests.fakes.fake_notion import FakeNotion
from tests.fakes.fake_ollama import DEFAULT_REPLY, FakeOllama, closed_port
from tests.reliability.harness import daily_history, daily_schedule, page_key, report_config
from tests.support import ManualRuntime, RuntimeFactory, run_cli, utc

pytestmark = pytest.mark.slow

PROJECT = "faults"
TOKEN_ENV = "RF_FAULTS_NOTION_TOKEN"
DAY = date(2026, 3, 2)  # the business date reported on; its slot is 2026-03-03 09:00 UTC
NOW = utc(2026, 3, 3, 12, 0)
BUDGET_S = 30.0  # the in-step retry budget (SPEC §4)


@dataclass
class Waits:
    """Retry waits the steps asked for (``ctx.sleep``), recorded as the worker's clock passes them."""

    slept: list[float] = field(default_factory=list)


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> Waits:
    """Every step's waits (``ctx.sleep``, a run's ``Lease.sleep`` on the manual clock) recorded as they pass."""
    found = Waits()
    sleep = lease.Lease.sleep

    def recording(self: lease.Lease, seconds: float, stop: Any) -> None:
        found.slept.append(seconds)
        sleep(self, seconds, stop)

    monkeypatch.setattr(lease.Lease, "sleep", recording)
    return found


def normal_reply(body: dict[str, Any]) -> str:
    return DEFAULT_REPLY


@dataclass
class Setup:
    tmp: Path
    repo: Path
    ollama: FakeOllama
    notion: FakeNotion
    monkeypatch: pytest.MonkeyPatch
    waits: Waits
    build: RuntimeFactory
    reply: Callable[[dict[str, Any]], str] = normal_reply  # what FakeOllama answers (a test may swap it)
    config: Path = field(init=False)
    rt: Any = field(init=False, default=None)

    def runtime(self, *, llm: dict[str, Any] | None = None, notion: dict[str, Any] | None = None,
                token: str | None = None, reports_dir: str = "reports") -> ManualRuntime:
        llm = {"provider": "ollama", "host": self.ollama.url, "timeout": "30s", **(llm or {})}
        notion = {"enabled": True, "token_env": TOKEN_ENV, "database_id": self.notion.database_id,
                  "base_url": self.notion.url, "timeout": "5s", **(notion or {})}
        self.config = report_config(self.tmp, db_url="sqlite:///rf.db", repo=self.repo, project=PROJECT,
                                    schedules=[daily_schedule("daily", PROJECT)], reports_dir=reports_dir,
                                    worker={"max_attempts": 2, "retry_backoff": "1m"}, llm=llm, notion=notion)
        self.monkeypatch.setenv(TOKEN_ENV, self.notion.token if token is None else token)
        rt = self.build.from_file(self.config, at=utc(2026, 3, 1), actor="reliability")
        definitions.apply(rt)
        rt.clock.set(NOW)
        self.rt = rt
        return rt

    def trigger(self, day: date = DAY) -> int:
        return actions.trigger(self.rt, "daily", day=day).run_id

    def attempt(self, worker: Worker | None = None) -> str:
        """One claim and execution; returns the run's status afterwards."""
        outcome = (worker or Worker(self.rt, "w")).run_one()
        assert outcome is not None, "nothing was claimable"
        return outcome.status.value

    def until_done(self, run_id: int) -> dict[str, Any]:
        """Attempt, then move the clock past the backoff, until the run is final; return runs show --json."""
        for _ in range(5):
            status = self.attempt()
            if status != "RETRY_PENDING":
                break
            shown = self.show(run_id)
            self.rt.clock.set(inputs.instant(shown["not_before"]) + timedelta(seconds=1))
        return self.show(run_id)

    def show(self, run_id: int) -> dict[str, Any]:
        result = run_cli("runs", "show", str(run_id), "--json", config=self.config)
        assert result.returncode == 0, result.stderr
        shown: dict[str, Any] = json.loads(result.stdout)
        return shown

    def report_files(self) -> list[str]:
        root = self.tmp / "reports"
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, waits: Waits, runtime: RuntimeFactory) -> Iterator[Setup]:
    repo = daily_history(tmp_path, utc(2026, 3, 1), 3)
    made: Setup | None = None
    with FakeOllama(reply=lambda body: made.reply(body) if made else "") as ollama, \
            FakeNotion(token="secret_faults_token") as notion:
        made = Setup(tmp_path, repo.path, ollama, notion, monkeypatch, waits, runtime)
        yield made


def steps_of(shown: dict[str, Any]) -> dict[str, tuple[str, int]]:
    return {s["name"]: (s["status"], s["attempts"]) for s in shown["steps"]}


def attempts_of(shown: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(a["outcome"], a["error_code"]) for a in shown["attempts"]]


# --- Ollama ---------------------------------------------------------------------------------------


def test_ollama_down_fails_model_unavailable_after_bounded_retries(setup: Setup, waits: Waits) -> None:
    port = closed_port()
    setup.runtime(llm={"host": f"http://127.0.0.1:{port}"})
    shown = setup.until_done(setup.trigger())
    assert shown["status"] == "FAILED" and shown["error_code"] == "MODEL_UNAVAILABLE"
    assert attempts_of(shown) == [("retry", "MODEL_UNAVAILABLE"), ("failed", "MODEL_UNAVAILABLE")]
    assert steps_of(shown)["COLLECT_GIT"] == ("SUCCESS", 1)  # not collected again on the retry
    assert steps_of(shown)["GENERATE_REPORT"] == ("FAILED", 2)
    message = shown["error_message"]
    assert f"127.0.0.1:{port}" in message and "not reachable" in message and "ollama serve" in message
    # In-step retries: bounded by the 30 s budget of waiting, per run attempt.
    per_attempt = len(waits.slept) / 2
    assert 1 <= per_attempt <= 8 and sum(waits.slept) <= 2 * BUDGET_S
    assert setup.report_files() == []


def test_ollama_slower_than_its_timeout_is_not_retried_inside_the_step(setup: Setup, waits: Waits) -> None:
    setup.runtime(llm={"timeout": "300ms"})
    setup.ollama.script("/api/chat", [(200, None, 1.0)] * 2)  # each generation takes 1 s
    shown = setup.until_done(setup.trigger())
    assert shown["status"] == "FAILED" and shown["error_code"] == "MODEL_UNAVAILABLE"
    assert "within 0.3s" in shown["error_message"] and "timeout" in shown["error_message"]
    assert len(setup.ollama.requests_to("/api/chat")) == 2  # one per run attempt: no in-step retry of a timeout
    assert attempts_of(shown) == [("retry", "MODEL_UNAVAILABLE"), ("failed", "MODEL_UNAVAILABLE")]
    assert waits.slept == []
    assert setup.report_files() == []


def test_ollama_answering_500_is_retried_within_the_budget_then_fails(setup: Setup, waits: Waits) -> None:
    setup.runtime()
    setup.ollama.script("/api/chat", [(500, {"error": "CUDA out of memory"}, 0.0)] * 100)
    shown = setup.until_done(setup.trigger())
    assert shown["status"] == "FAILED" and shown["error_code"] == "MODEL_UNAVAILABLE"
    assert "HTTP 500" in shown["error_message"] and "CUDA out of memory" in shown["error_message"]
    chats = len(setup.ollama.requests_to("/api/chat"))
    assert 2 <= chats <= 2 * 8, chats  # at most 8 tries per run attempt, 2 run attempts
    assert chats == len(waits.slept) + 2  # every try but the last of each attempt waited first
    assert sum(waits.slept) <= 2 * BUDGET_S
    assert steps_of(shown)["GENERATE_REPORT"] == ("FAILED", 2)
    assert setup.report_files() == []


# --- Notion ---------------------------------------------------------------------------------------


def test_notion_429_with_retry_after_is_honoured_inside_the_step(setup: Setup, waits: Waits) -> None:
    setup.runtime()
    setup.notion.fail_next(2, 429, {"Retry-After": "2"})
    shown = setup.until_done(setup.trigger())
    assert shown["status"] == "SUCCESS" and shown["attempt_count"] == 1
    assert waits.slept.count(2.0) == 2  # waited exactly what the server asked, twice
    assert len(setup.notion.live_pages(shown["idempotency_key"])) == 1


def test_notion_429_asking_for_longer_than_the_budget_becomes_not_before(setup: Setup, waits: Waits) -> None:
    setup.runtime()
    setup.notion.fail_next(1, 429, {"Retry-After": "120"})
    run_id = setup.trigger()
    assert setup.attempt() == "RETRY_PENDING"
    first = setup.show(run_id)
    assert first["error_code"] == "NOTION_RATE_LIMITED" and "429" in first["error_message"]
    assert inputs.instant(first["not_before"]) - NOW >= timedelta(seconds=120)  # the server's wait, not the 1 min backoff
    assert sum(waits.slept) == 0  # nothing slept inside the step
    setup.rt.clock.set(inputs.instant(first["not_before"]) + timedelta(seconds=1))
    shown = setup.until_done(run_id)
    assert shown["status"] == "SUCCESS"
    assert steps_of(shown) == {"COLLECT_GIT": ("SUCCESS", 1), "GENERATE_REPORT": ("SUCCESS", 1),
                               "SAVE_MARKDOWN": ("SUCCESS", 1), "UPLOAD_NOTION": ("SUCCESS", 2),
                               "DELIVER": ("SKIPPED", 1)}
    assert len(setup.notion.live_pages(shown["idempotency_key"])) == 1


def test_notion_500_fails_the_upload_but_keeps_the_markdown(setup: Setup, waits: Waits) -> None:
    setup.runtime()
    setup.notion.fail_next(1000, 500)
    shown = setup.until_done(setup.trigger())
    assert shown["status"] == "PARTIAL_SUCCESS" and shown["error_code"] == "NOTION_UNAVAILABLE"
    assert "HTTP 500" in shown["error_message"]
    assert attempts_of(shown) == [("retry", "NOTION_UNAVAILABLE"), ("partial_success", "NOTION_UNAVAILABLE")]
    requests = len(setup.notion.requests)
    assert 2 <= requests <= 2 * 10, requests  # at most 10 tries per attempt
    assert sum(waits.slept) <= 2 * BUDGET_S + 1e-6
    _assert_markdown_complete(setup, shown)
    assert setup.notion.live_pages() == []


def test_notion_401_is_permanent_and_never_shows_the_token(setup: Setup, waits: Waits) -> None:
    setup.runtime(token="secret_wrong_token_123")
    shown = setup.until_done(setup.trigger())
    assert shown["status"] == "PARTIAL_SUCCESS" and shown["error_code"] == "NOTION_UNAUTHORIZED"
    assert attempts_of(shown) == [("partial_success", "NOTION_UNAUTHORIZED")]  # not retried
    assert len(setup.notion.requests) == 1
    assert "HTTP 401" in shown["error_message"] and "notion.token_env" in shown["error_message"]
    assert "secret_wrong_token_123" not in json.dumps(shown)
    _assert_markdown_complete(setup, shown)


def test_notion_timeouts_then_an_answer_make_one_page(setup: Setup, waits: Waits) -> None:
    setup.runtime(notion={"timeout": "300ms"})
    setup.notion.timeout_next(2, delay_s=1.0)
    shown = setup.until_done(setup.trigger())
    assert shown["status"] == "SUCCESS" and shown["attempt_count"] == 1
    assert len(setup.notion.live_pages(shown["idempotency_key"])) == 1


def test_notion_that_never_answers_fails_unavailable_after_bounded_retries(setup: Setup, waits: Waits) -> None:
    setup.runtime(notion={"timeout": "200ms"})
    setup.notion.timeout_next(1000, delay_s=0.5)
    shown = setup.until_done(setup.trigger())
    assert shown["status"] == "PARTIAL_SUCCESS" and shown["error_code"] == "NOTION_UNAVAILABLE"
    assert "did not answer in time" in shown["error_message"]
    assert 2 <= len(setup.notion.requests) <= 2 * 10
    assert sum(waits.slept) <= 2 * BUDGET_S + 1e-6
    _assert_markdown_complete(setup, shown)


def test_notion_create_answer_lost_finds_the_stored_page(setup: Setup, waits: Waits) -> None:
    setup.runtime()
    setup.notion.drop_after_create(1)  # the page is stored; the answer never arrives
    shown = setup.until_done(setup.trigger())
    assert shown["status"] == "SUCCESS" and shown["attempt_count"] == 1
    made = [p for p in setup.notion.pages.values() if page_key(p) == shown["idempotency_key"]]
    assert len(made) == 1 and not made[0]["in_trash"]  # found again, not created twice


# --- the repository ------------------------------------------------------------------------------


def test_repository_deleted_between_runs_fails_the_next_collect(setup: Setup) -> None:
    rt = setup.runtime()
    worker = Worker(rt, "w")  # started while the repository was there
    first = setup.trigger(DAY - timedelta(days=1))
    assert setup.attempt(worker) == "SUCCESS"
    shutil.rmtree(setup.repo)
    second = setup.trigger()
    assert setup.attempt(worker) == "FAILED"
    shown = setup.show(second)
    assert shown["error_code"] == "GIT_REPO_NOT_FOUND" and str(setup.repo) in shown["error_message"]
    assert attempts_of(shown) == [("failed", "GIT_REPO_NOT_FOUND")]  # permanent: not retried
    assert steps_of(shown)["GENERATE_REPORT"] == ("PENDING", 0)
    assert [f for f in setup.report_files() if str(DAY) in f] == []
    assert setup.show(first)["status"] == "SUCCESS"


def test_worker_without_the_repository_leaves_the_run_queued(setup: Setup) -> None:
    rt = setup.runtime()
    shutil.rmtree(setup.repo)
    run_id = setup.trigger()
    assert Worker(rt, "elsewhere").run_one() is None  # this node cannot open the repository (SPEC §13)
    assert setup.show(run_id)["status"] == "QUEUED"


def test_repository_deleted_after_collect_the_run_finishes_from_the_persisted_commits(setup: Setup) -> None:
    setup.runtime()
    repo = setup.repo

    def reply_after_deleting_the_repo(body: dict[str, Any]) -> str:
        shutil.rmtree(repo, ignore_errors=True)  # mid-run, inside GENERATE_REPORT
        return "## Summary\n\nWork happened.\n"

    setup.reply = reply_after_deleting_the_repo
    shown = setup.until_done(setup.trigger())
    assert not repo.exists()
    assert shown["status"] == "SUCCESS", shown["error_message"]
    assert len(shown["steps"][0]["output"]["commits"]) == 2
    assert steps_of(shown)["COLLECT_GIT"] == ("SUCCESS", 1)


# --- the reports directory ---------------------------------------------------------------------------


def test_reports_directory_read_only_fails_report_write_failed(setup: Setup, waits: Waits) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed: cannot make a directory read-only for root")
    setup.runtime()
    reports = setup.tmp / "reports"
    (reports / PROJECT).mkdir(parents=True)
    (reports / PROJECT / "keep.md").write_text("an older report\n")
    made = subprocess.run(["chattr", "+i", str(reports / PROJECT)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {made.stderr.strip()}")
    try:
        shown = setup.until_done(setup.trigger())
    finally:
        subprocess.run(["chattr", "-i", str(reports / PROJECT)], check=True)
    assert shown["status"] == "FAILED" and shown["error_code"] == "REPORT_WRITE_FAILED"
    assert attempts_of(shown) == [("failed", "REPORT_WRITE_FAILED")]
    assert "operation not permitted" in shown["error_message"] and str(reports / PROJECT) in shown["error_message"]
    assert steps_of(shown)["GENERATE_REPORT"] == ("SUCCESS", 1)
    assert setup.report_files() == [f"{PROJECT}/keep.md"]  # no partial or temp file
    assert setup.notion.requests == []  # the upload never started


def test_reports_directory_full_fails_report_write_failed(setup: Setup, waits: Waits) -> None:
    reports = setup.tmp / "reports"
    reports.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(reports)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tiny tmpfs to fill up: {mounted.stderr.strip()}")
    try:
        filler = reports / "filler.bin"
        with open(filler, "wb", buffering=0) as handle:
            try:
                while handle.write(b"x" * 1024):
                    pass
            except OSError:
                pass  # ENOSPC: the file system is full
        kept = filler.read_bytes()
        setup.runtime()
        shown = setup.until_done(setup.trigger())
        assert shown["status"] == "FAILED" and shown["error_code"] == "REPORT_WRITE_FAILED"
        assert attempts_of(shown) == [("failed", "REPORT_WRITE_FAILED")]
        assert "the disk is full" in shown["error_message"]
        leftovers = sorted(p.name for p in reports.rglob("*") if p.is_file() and p != filler)
        assert leftovers == []  # no partial report, no temp file
        assert filler.read_bytes() == kept
    finally:
        subprocess.run(["umount", str(reports)], check=True)


def _assert_markdown_complete(setup: Setup, shown: dict[str, Any]) -> None:
    """The saved report is whole: its bytes match the sha256 the run recorded, and no temp file is left."""
    import hashlib

    (markdown,) = [a for a in shown["artifacts"] if a["kind"] == "markdown"]
    path = Path(markdown["location"].split(":", 1)[1])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == markdown["sha256"]
    assert setup.report_files() == [str(path.relative_to(setup.tmp / "reports"))]
