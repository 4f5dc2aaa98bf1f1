"""GENERATE_REPORT: statistics, prompts and trimming, builtin writer, Ollama through the fake."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engine.core.errors import StepError
from steps.collect_git import collect
from steps.generate_report import (
    BuiltinWriter,
    OllamaWriter,
    ReportInput,
    WriterResult,
    budget_for,
    compute_stats,
    generate,
    render_prompt,
)
from steps.git_log import CommitInfo, FileChange
from steps.ollama_chat import RetryPolicy
from steps.report_model import ReportMaterial
from tests.fakes.fake_ollama import DEFAULT_MODEL, FakeOllama, closed_port, fake_digest
from tests.fakes.gitrepo import make_repo

SEOUL = ZoneInfo("Asia/Seoul")
OPTIONS = {"temperature": 0.2, "seed": 42}
TINY = RetryPolicy(budget_s=1.0, initial_s=0.001, max_wait_s=0.002, max_attempts=4)
SECTIONS = ["## Summary", "## Changes by area", "## Notable commits", "## Statistics"]


def commit(i: int, *, files: Mapping[str, tuple[int, int]] | None = None,
           author: tuple[str, str] = ("Alice Kim", "alice@example.com"),
           subject: str | None = None, body: str = "") -> CommitInfo:
    changes = [FileChange(path=p, insertions=a, deletions=d)
               for p, (a, d) in (files or {f"src/mod{i}.py": (i + 1, i % 3)}).items()]
    at = datetime(2026, 9, 29, 1, tzinfo=timezone.utc) + timedelta(minutes=i)
    return CommitInfo(sha=hashlib.sha1(str(i).encode()).hexdigest(), author_name=author[0],
                      author_email=author[1], authored_at=at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                      subject=subject or f"Change number {i}", body=body, files=changes,
                      insertions=sum(c.insertions for c in changes),
                      deletions=sum(c.deletions for c in changes))


def report_input(commits: list[CommitInfo], **overrides: Any) -> ReportInput:
    fields: dict[str, Any] = {
        "workflow": "daily_report", "project": "platform", "business_key": "2026-09-29",
        "window_start": "2026-09-28T15:00:00Z", "window_end": "2026-09-29T15:00:00Z",
        "timezone": "Asia/Seoul", "commits": commits, "prompt_version": "v1",
        "on_empty": "report"}
    return ReportInput(**{**fields, **overrides})


class RecordingWriter:
    """A writer that reads the prompt, as a model would, and records what it got."""

    provider = "recording"
    reads_prompt = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def write(self, prompt: str, *, system: str, options: Mapping[str, Any],
              material: ReportMaterial, earlier: Sequence[tuple[str, str]] = ()) -> WriterResult:
        self.calls.append((prompt, system, dict(options)))
        return WriterResult("## Summary\n\nDone.\n\n## Changes by area\n\n### src\n\n- x\n\n"
                            "## Notable commits\n\n- y\n", "rec:1b", "sha256:feed")


# -- statistics and the builtin writer ------------------------------------------------


def test_compute_stats() -> None:
    bob = ("Bob Builder", "bob@example.com")
    commits = [
        commit(1, files={"src/a.py": (10, 2), "README.md": (1, 0)}),
        commit(2, files={"src/a.py": (5, 5), "docs/guide.md": (20, 0)}, author=bob),
        commit(3, files={"src/b.py": (3, 0)}),
    ]
    stats = compute_stats(commits)
    assert (stats["commits"], stats["author_count"], stats["files_changed"]) == (3, 2, 4)
    assert (stats["insertions"], stats["deletions"]) == (39, 7)
    assert [(a["name"], a["commits"]) for a in stats["authors"]] == [("Alice Kim", 2),
                                                                     ("Bob Builder", 1)]
    assert [(a["area"], a["commits"], a["files"]) for a in stats["areas"]] == [
        ("src", 3, 2), ("docs", 1, 1), ("(root)", 1, 1)]
    assert stats["busiest_files"][0] == {"path": "src/a.py", "commits": 2, "insertions": 15,
                                         "deletions": 7}
    assert compute_stats(list(reversed(commits))) == stats


def test_builtin_report_is_deterministic_and_has_the_sections() -> None:
    inp = report_input([commit(i) for i in range(12)])
    first = generate(inp, BuiltinWriter(), num_ctx=8192, options=OPTIONS)
    second = generate(inp, BuiltinWriter(), num_ctx=8192, options=OPTIONS)

    assert first.text.encode() == second.text.encode()
    assert first == second
    positions = [first.text.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert first.text.startswith("# Daily report: platform, 2026-09-29\n")
    assert "2026-09-29 00:00 → 2026-09-30 00:00 (Asia/Seoul)" in first.text
    assert (first.provider, first.model, first.model_digest) == ("builtin", "builtin", None)
    assert first.options == {"num_ctx": 8192, "seed": 42, "temperature": 0.2}
    assert first.stats == compute_stats(inp.commits) and not first.trimmed
    assert len(first.prompt_sha256) == 64 and len(first.template_sha256) == 64


def test_report_from_a_real_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("Add parser\n\nHandles the v2 format.", at=datetime(2026, 9, 29, 9, tzinfo=SEOUL),
                files={"src/parser.py": "a\nb\nc\n", "tests/test_parser.py": "t\n"})
    start = datetime(2026, 9, 29, tzinfo=SEOUL)
    out = collect(repo.path, ["main"], start, start + timedelta(days=1))
    inp = report_input(out.commits, window_start=out.window_start, window_end=out.window_end)

    report = generate(inp, BuiltinWriter(), num_ctx=4096, options=OPTIONS)

    assert "Add parser" in report.text and "`src`" in report.text
    assert "| 1 | 1 | 2 | +4 | −0 |" in report.text


def test_weekly_report_uses_its_own_template() -> None:
    inp = report_input([commit(1)], workflow="weekly_report", business_key="2026-W40")
    prompt, trimmed = render_prompt(inp, compute_stats(inp.commits), budget_chars=10_000)
    report = generate(inp, BuiltinWriter(), num_ctx=8192, options=OPTIONS)
    assert "weekly work report" in prompt and "ISO week 2026-W40" in prompt and not trimmed
    assert report.text.startswith("# Weekly report: platform, 2026-W40\n")


def test_empty_window_gives_a_no_activity_report_without_a_model() -> None:
    writer = RecordingWriter()
    report = generate(report_input([]), writer, num_ctx=8192, options=OPTIONS)
    assert writer.calls == []
    assert "No commits were authored in platform during this day." in report.text
    assert (report.model, report.prompt_sha256, report.stats["commits"]) == ("none", "", 0)


# -- prompts, versions and trimming ----------------------------------------------------


@pytest.mark.parametrize("version", ["v99", "../../etc/passwd", "1"])
def test_unknown_prompt_version_is_a_config_error(version: str) -> None:
    inp = report_input([commit(1)], prompt_version=version)
    with pytest.raises(StepError) as caught:
        generate(inp, BuiltinWriter(), num_ctx=8192, options=OPTIONS)
    assert caught.value.code == "CONFIG_INVALID" and not caught.value.retryable
    with pytest.raises(StepError):
        render_prompt(inp, compute_stats(inp.commits), budget_chars=10_000)


def test_budget_follows_num_ctx() -> None:
    assert budget_for(8192) == (8192 - 2048 - 700) * 3
    assert budget_for(2048) < budget_for(4096) < budget_for(8192) < budget_for(32768)
    assert budget_for(512) == 600


def test_prompt_lists_everything_within_budget() -> None:
    inp = report_input([commit(i, body="Why: because.") for i in range(5)])
    prompt, trimmed = render_prompt(inp, compute_stats(inp.commits), budget_chars=10_000)
    assert not trimmed and "NOTE" not in prompt
    assert "Commits (oldest first; all 5)" in prompt
    assert prompt.count("Change number") == 5 and "    Why: because." in prompt


def test_trimming_is_said_in_the_prompt_and_in_the_report() -> None:
    commits = [commit(i, body="Long explanation. " * 20) for i in range(200)]
    inp = report_input(commits)
    prompt, trimmed = render_prompt(inp, compute_stats(commits), budget_chars=budget_for(2048))
    assert trimmed
    assert "NOTE: only" in prompt and "of 200 commits are listed" in prompt
    assert len(prompt) < budget_for(2048) + 4000

    writer = RecordingWriter()
    report = generate(inp, writer, num_ctx=2048, options=OPTIONS)
    assert report.trimmed
    assert "> **Note:** the narrative was written from" in report.text
    assert "of 200 commits" in report.text and "num_ctx=2048" in report.text
    assert writer.calls[0][0] == prompt
    assert writer.calls[0][2] == {"num_ctx": 2048, "seed": 42, "temperature": 0.2}
    # the largest commits are the ones kept
    assert "Change number 199" in prompt and "Change number 0 " not in prompt


def test_shortened_messages_are_noted() -> None:
    commits = [commit(i, body="Detail line.\n" * 6) for i in range(20)]
    inp = report_input(commits)
    full, _ = render_prompt(inp, compute_stats(commits), budget_chars=100_000)
    short, trimmed = render_prompt(inp, compute_stats(commits), budget_chars=len(full) // 2)
    assert trimmed and "messages and file lists were shortened" in short
    assert short.count("Change number") == 20


def test_builtin_writer_is_not_concerned_by_trimming() -> None:
    inp = report_input([commit(i, body="Long explanation. " * 20) for i in range(200)])
    report = generate(inp, BuiltinWriter(), num_ctx=1024, options=OPTIONS)
    assert not report.trimmed and "**Note:**" not in report.text


# -- Ollama through the loopback fake --------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


class Sleeps(list[float]):
    """Stands in for ``ctx.sleep``: records the waits, never sleeps."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_ollama_generation_records_model_digest_and_prompt(fake: FakeOllama) -> None:
    inp = report_input([commit(i) for i in range(3)])
    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, retry=TINY, sleep=Sleeps())

    report = generate(inp, writer, num_ctx=4096, options=OPTIONS)

    [chat] = fake.requests_to("/api/chat")
    system, user = chat.body["messages"]
    assert (system["role"], user["role"]) == ("system", "user")
    assert report.prompt_sha256 == hashlib.sha256(
        f"{system['content']}\n\n{user['content']}".encode()).hexdigest()
    assert chat.body["options"] == {"num_ctx": 4096, "seed": 42, "temperature": 0.2}
    assert chat.body["stream"] is False and chat.body["model"] == DEFAULT_MODEL
    assert (report.provider, report.model) == ("ollama", DEFAULT_MODEL)
    assert report.model_digest == fake_digest(DEFAULT_MODEL)
    assert "The team moved the project forward." in report.text
    assert report.text.index("## Summary") < report.text.index("## Statistics")
    assert fake.generations == 1


def test_ollama_server_error_is_retried(fake: FakeOllama) -> None:
    fake.script("/api/chat", [(500, {"error": "llama runner process has terminated"}, 0.0)])
    sleeps = Sleeps()
    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, retry=TINY, sleep=sleeps)

    report = generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)

    assert len(fake.requests_to("/api/chat")) == 2 and fake.generations == 1
    assert len(sleeps) == 1 and report.model == DEFAULT_MODEL


def test_ollama_persistent_server_error(fake: FakeOllama) -> None:
    fake.script("/api/chat", [(503, {"error": "server busy"}, 0.0)] * 10)
    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, retry=TINY, sleep=Sleeps())
    with pytest.raises(StepError) as caught:
        generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
    assert caught.value.code == "MODEL_UNAVAILABLE" and caught.value.retryable
    assert "HTTP 503 server busy (4 attempts)" in caught.value.message
    assert len(fake.requests_to("/api/chat")) == TINY.max_attempts


def test_ollama_down_is_unavailable_after_bounded_retries() -> None:
    host = f"http://127.0.0.1:{closed_port()}"
    sleeps = Sleeps()
    writer = OllamaWriter(host, DEFAULT_MODEL, timeout_s=5, retry=TINY, sleep=sleeps)
    with pytest.raises(StepError) as caught:
        generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
    assert caught.value.code == "MODEL_UNAVAILABLE" and caught.value.retryable
    assert f"ollama at {host} is not reachable" in caught.value.message
    assert DEFAULT_MODEL in caught.value.message and "4 attempts" in caught.value.message
    assert len(sleeps) == TINY.max_attempts - 1


def test_retry_waits_stay_within_the_budget() -> None:
    host = f"http://127.0.0.1:{closed_port()}"
    sleeps = Sleeps()
    policy = RetryPolicy(budget_s=30.0, initial_s=1.0, max_wait_s=10.0, max_attempts=100)
    writer = OllamaWriter(host, DEFAULT_MODEL, timeout_s=5, retry=policy, sleep=sleeps)
    with pytest.raises(StepError):
        generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
    assert 3 <= len(sleeps) < 10
    assert sum(sleeps) <= 30.0
    assert all(b >= a - 1.0 for a, b in zip(sleeps, sleeps[1:], strict=False))  # growing


def test_missing_model_says_how_to_pull_it() -> None:
    with FakeOllama(models=["qwen2.5:0.5b"]) as fake:
        writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, retry=TINY, sleep=Sleeps())
        with pytest.raises(StepError) as caught:
            generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
        assert fake.requests_to("/api/chat") == []
    assert caught.value.code == "MODEL_UNAVAILABLE" and caught.value.retryable
    assert caught.value.message == (f"ollama at {fake.url} has no model '{DEFAULT_MODEL}' "
                                    f"(run: ollama pull {DEFAULT_MODEL})")


def test_model_removed_between_lookup_and_generation(fake: FakeOllama) -> None:
    fake.script("/api/chat", [(404, {"error": f"model '{DEFAULT_MODEL}' not found"}, 0.0)])
    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, retry=TINY, sleep=Sleeps())
    with pytest.raises(StepError) as caught:
        generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
    assert caught.value.code == "MODEL_UNAVAILABLE"
    assert f"(run: ollama pull {DEFAULT_MODEL})" in caught.value.message
    assert len(fake.requests_to("/api/chat")) == 1


def test_ollama_timeout_is_not_retried_in_the_step(fake: FakeOllama) -> None:
    fake.script("/api/chat", [(200, None, 2.0)])
    sleeps = Sleeps()
    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=0.2, retry=TINY, sleep=sleeps)
    with pytest.raises(StepError) as caught:
        generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
    assert caught.value.code == "MODEL_UNAVAILABLE" and caught.value.retryable
    assert "did not answer the generation" in caught.value.message and "0.2s" in caught.value.message
    assert sleeps == [] and len(fake.requests_to("/api/chat")) == 1


def test_bad_request_is_permanent(fake: FakeOllama) -> None:
    fake.script("/api/chat", [(400, {"error": "invalid options: num_ctx"}, 0.0)])
    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, retry=TINY, sleep=Sleeps())
    with pytest.raises(StepError) as caught:
        generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
    assert caught.value.code == "CONFIG_INVALID" and not caught.value.retryable


def test_generation_holds_the_host_lock(fake: FakeOllama) -> None:
    fake.script("/api/chat", [(500, {"error": "boom"}, 0.0)])
    taken: list[str] = []

    @contextmanager
    def exclusive(key: str) -> Iterator[None]:
        taken.append(key)
        yield

    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, retry=TINY, sleep=Sleeps(),
                          exclusive=exclusive)
    generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
    assert taken == [f"ollama:{fake.url}"] * 2


def test_thinking_is_dropped_from_the_narrative() -> None:
    reply = "<think>internal musings</think>\n## Summary\n\nShipped.\n"
    with FakeOllama(reply=reply) as fake:
        writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, retry=TINY, sleep=Sleeps())
        report = generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
    assert "musings" not in report.text and "Shipped." in report.text


def test_window_dates_in_prompt_are_local() -> None:
    inp = report_input([commit(1)])
    prompt, _ = render_prompt(inp, compute_stats(inp.commits), budget_chars=10_000)
    assert "2026-09-29 00:00 → 2026-09-30 00:00 (Asia/Seoul)" in prompt
    assert "2026-09-29 10:01" in prompt  # 01:01Z shown in Seoul time
    assert date(2026, 9, 29).isoformat() in prompt


def test_one_waiting_budget_covers_the_model_lookup_and_the_generation(fake: FakeOllama) -> None:
    """SPEC §4: at most 30 s of waiting in all per step execution, not 30 s per HTTP call."""
    fake.script("/api/tags", [(503, {"error": "server busy"}, 0.0)] * 4)  # then the lookup succeeds
    fake.script("/api/chat", [(503, {"error": "server busy"}, 0.0)] * 100)
    sleeps = Sleeps()
    policy = RetryPolicy(budget_s=30.0, initial_s=1.0, max_wait_s=10.0, max_attempts=100)
    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=5, retry=policy, sleep=sleeps)
    with pytest.raises(StepError) as caught:
        generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
    assert caught.value.code == "MODEL_UNAVAILABLE" and "HTTP 503" in caught.value.message
    assert len(fake.requests_to("/api/tags")) == 5 and fake.requests_to("/api/chat")
    assert sum(sleeps) <= policy.budget_s, sleeps


# -- the report's language --------------------------------------------------------------

KO_SECTIONS = ["## 요약", "## 영역별 변경 사항", "## 주요 커밋", "## 통계"]


def test_a_korean_report_from_the_builtin_writer_has_korean_headings_and_sentences() -> None:
    inp = report_input([commit(i) for i in range(3)], language="ko", prompt_version="v2")
    report = generate(inp, BuiltinWriter(), num_ctx=4096, options=OPTIONS)
    text = report.text
    assert text.startswith("# 일일 업무 보고: platform, 2026-09-29\n")
    positions = [text.index(heading + "\n") for heading in KO_SECTIONS]
    assert positions == sorted(positions)
    assert not any(heading in text for heading in SECTIONS)
    assert "- **기간:** 2026-09-29 00:00 → 2026-09-30 00:00 (Asia/Seoul)" in text
    assert "작성자 1명이 커밋 3개로 파일 3개를 변경했습니다" in text
    assert "| 커밋 | 작성자 | 변경 파일 | 추가 | 삭제 |" in text
    assert report.language == "ko"


def test_an_english_report_stays_english() -> None:
    report = generate(report_input([commit(1)], prompt_version="v2"), BuiltinWriter(), num_ctx=4096,
                      options=OPTIONS)
    assert report.text.startswith("# Daily report: platform, 2026-09-29\n")
    assert all(heading in report.text for heading in SECTIONS)
    assert "1 commit by 1 author changed 1 file" in report.text


def test_a_korean_weekly_report_without_activity_says_so_in_korean() -> None:
    inp = report_input([], language="ko", workflow="weekly_report", business_key="2026-W40",
                       prompt_version="v2")
    text = generate(inp, BuiltinWriter(), num_ctx=4096, options=OPTIONS).text
    assert text.startswith("# 주간 업무 보고: platform, 2026-W40\n")
    assert "## 요약\n\n이번 주 platform에 작성된 커밋이 없습니다." in text


def test_the_ollama_prompt_of_a_korean_run_asks_for_korean(fake: FakeOllama) -> None:
    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, retry=TINY, sleep=Sleeps())
    inp = report_input([commit(1)], language="ko", prompt_version="v2")
    report = generate(inp, writer, num_ctx=4096, options=OPTIONS)
    [chat] = fake.requests_to("/api/chat")
    system, user = (m["content"] for m in chat.body["messages"])
    assert "Write the whole report in\nKorean (한국어)" in system
    assert "in Korean (한국어)." in user
    assert [line for line in user.splitlines() if line.startswith("## ")] == KO_SECTIONS[:3]
    assert report.prompt_sha256 == hashlib.sha256(f"{system}\n\n{user}".encode()).hexdigest()
    assert "## 통계" in report.text and "- **작성:** ollama" in report.text


def test_prompt_v1_is_unchanged_by_the_language_placeholders(fake: FakeOllama) -> None:
    writer = OllamaWriter(fake.url, DEFAULT_MODEL, timeout_s=10, retry=TINY, sleep=Sleeps())
    generate(report_input([commit(1)]), writer, num_ctx=4096, options=OPTIONS)
    [chat] = fake.requests_to("/api/chat")
    system = chat.body["messages"][0]["content"]
    assert system.endswith("Write in English.") and "$" not in system
