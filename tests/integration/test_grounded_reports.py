"""Grounded reports end to end (SPEC §16.1): the fake model's answers checked, repaired once,
else replaced section by section, and the verdict in the step output, the file, `runs show`
and the run page."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from tests.fakes.fake_ollama import FakeOllama
from tests.fakes.gitrepo import GitRepo
from tests.integration.test_report_workflow import NOW, front_matter, platform_runtime, show
from tests.integration.test_report_workflow import repo as repo  # noqa: F401 - the fixture
from tests.support import RuntimeFactory, output_of, run_cli, run_next, write_config

REPORT = "reports/platform/2026-09-29-platform-daily-summary.md"
INVENTED = "deadbee"  # seven hex characters: a commit id, and none of the run's


@pytest.fixture
def model() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


def answer(headings: tuple[str, str, str], bodies: tuple[str, str, str]) -> str:
    return "\n".join(f"## {h}\n\n{b}\n" for h, b in zip(headings, bodies, strict=True))


EN = ("Summary", "Changes by area", "Notable commits")
KO = ("요약", "영역별 변경 사항", "주요 커밋")


def shas(rt: Any, run_id: int) -> list[str]:
    return [c["sha"] for c in output_of(show(rt, run_id), 0)["commits"]]


def run_day(rt: Any) -> int:
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    outcome = Worker(rt, "w").run_one()
    assert outcome is not None and outcome.status is RunStatus.SUCCESS, outcome
    return result.run_id


def sha_of(repo: GitRepo, subject: str) -> str:
    return repo.git("log", "--format=%H", f"--grep={subject}", "main").split()[0]


def test_an_invented_commit_is_repaired_once(sqlite_url: str, tmp_path: Path, repo: GitRepo, model: FakeOllama,
                                             runtime: RuntimeFactory) -> None:
    real = sha_of(repo, "afternoon")[:8]
    bad = answer(EN, (f"Work landed in `{INVENTED}` and `{real}`.", "### steps\n\n- b.py", "- it"))
    good = answer(EN, (f"Work landed in `{real}`.", "### steps\n\n- b.py", f"- `{real}` b.py"))
    model.replies([bad, good])
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": model.url})
    run_id = run_day(rt)

    first, second = model.requests_to("/api/chat")
    messages = second.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1] == first.body["messages"][1] and messages[2]["content"] == bad.strip()
    assert f"cites commit {INVENTED}, which is not among the run's commits" in messages[3]["content"]
    output = output_of(show(rt, run_id), 1)
    assert output["grounding"]["verdict"] == "repaired"
    assert output["grounding"]["violations"] == [
        f'section "Summary": cites commit {INVENTED}, which is not among the run\'s commits']
    text = (tmp_path / REPORT).read_text()
    assert front_matter(tmp_path / REPORT)["grounding"] == '"repaired"'
    assert INVENTED not in text and f"Work landed in `{real}`." in text


def test_a_second_failure_falls_back_section_by_section(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                        model: FakeOllama, runtime: RuntimeFactory) -> None:
    bad = answer(EN, ("The team kept going.", f"### engine\n\n- `{INVENTED}` sped things up",
                      "- nothing special"))
    model.replies([bad, bad])
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": model.url})
    run_id = run_day(rt)

    assert model.generations == 2
    output = output_of(show(rt, run_id), 1)
    assert output["grounding"]["verdict"] == "fallback"
    assert output["grounding"]["replaced"] == ["Changes by area"]
    text = (tmp_path / REPORT).read_text()
    assert INVENTED not in text
    assert "The team kept going." in text and "- nothing special" in text  # the sections that held
    assert f"`{sha_of(repo, 'first of the day')[:8]}` first of the day" in text  # the builtin's area list
    notes = [line for line in text.splitlines() if "failed the checks" in line]
    assert notes == ["> **Note:** the model's text for Changes by area failed the checks twice and "
                     "was replaced by the built-in writer's."]
    cited = re.findall(r"\b[0-9a-f]{7,40}\b", text.split("## Summary", 1)[1])
    assert cited and all(any(s.startswith(c) for s in shas(rt, run_id)) for c in cited)


def test_a_missing_section_is_asked_for_then_filled_in(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                       model: FakeOllama, runtime: RuntimeFactory) -> None:
    partial = "## Summary\n\nA quiet day.\n\n## Changes by area\n\n### engine\n\n- a.py\n"
    model.replies([partial, partial])
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": model.url})
    run_id = run_day(rt)

    repair = model.requests_to("/api/chat")[1].body["messages"][-1]["content"]
    assert 'section "Notable commits": is missing' in repair
    output = output_of(show(rt, run_id), 1)
    assert output["grounding"]["verdict"] == "fallback"
    assert output["grounding"]["replaced"] == ["Notable commits"]
    text = (tmp_path / REPORT).read_text()
    assert text.index("## Summary") < text.index("## Changes by area") < text.index("## Notable commits")
    notable = text.split("## Notable commits", 1)[1].split("## Statistics", 1)[0]
    biggest = sha_of(repo, "first of the day")[:8]
    assert "A quiet day." in text and f"- `{biggest}` first of the day — " in notable


def test_english_under_korean_headings_is_repaired(sqlite_url: str, tmp_path: Path, repo: GitRepo, model: FakeOllama,
                                                   runtime: RuntimeFactory) -> None:
    english = answer(KO, ("The team worked on the engine and the steps.", "### engine\n\n- work",
                          "- the biggest change"))
    korean = answer(KO, ("팀은 엔진과 단계 코드를 손보았습니다.", "### engine\n\n- 변경 두 건",
                         "- 가장 큰 변경입니다"))
    model.replies([english, korean])
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": model.url},
                          language="ko")
    run_id = run_day(rt)

    repair = model.requests_to("/api/chat")[1].body["messages"][-1]["content"]
    assert 'section "요약": is not in Korean' in repair and "Korean (한국어)" in repair
    assert output_of(show(rt, run_id), 1)["grounding"]["verdict"] == "repaired"
    assert "팀은 엔진과 단계 코드를 손보았습니다." in (tmp_path / REPORT).read_text()


def test_the_verdict_in_runs_show_and_on_the_run_page(sqlite_url: str, tmp_path: Path, repo: GitRepo, model: FakeOllama,
                                                      runtime: RuntimeFactory) -> None:
    from starlette.testclient import TestClient

    from engine.web.app import create_app

    model.replies([answer(EN, ("s", "a", f"- `{INVENTED}`")), answer(EN, ("s", "a", "- n"))])
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": model.url})
    run_id = run_day(rt)
    config = write_config(tmp_path / "reportflow.toml", db_url=sqlite_url)
    shown = run_cli("runs", "show", str(run_id), config=config)
    assert shown.returncode == 0, shown.stderr
    assert "grounding repaired" in shown.stdout and f"cites commit {INVENTED}" in shown.stdout
    as_json = run_cli("runs", "show", str(run_id), "--json", config=config)
    assert json.loads(as_json.stdout)["grounding"]["verdict"] == "repaired"
    page = TestClient(create_app(rt, token=None), base_url="http://127.0.0.1").get(f"/runs/{run_id}")
    assert page.status_code == 200
    assert re.search(r"<dt>grounding</dt><dd[^>]*>repaired; section &#34;Notable commits&#34;: "
                     rf"cites commit {INVENTED}", page.text), page.text


def test_a_run_pinned_before_grounding_is_retried_as_it_was(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                            model: FakeOllama, runtime: RuntimeFactory) -> None:
    bad = answer(EN, (f"Invented `{INVENTED}`.", "- a", "- n"))
    model.replies([bad, bad])
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo,
                          llm={"provider": "ollama", "host": model.url, "prompt_version": "v2"})
    run_id = run_day(rt)
    first = (tmp_path / REPORT).read_bytes()
    assert model.generations == 1 and f"`{INVENTED}`" in first.decode()  # v2 saved it as it was
    assert output_of(show(rt, run_id), 1).get("grounding") is None
    assert "grounding" not in front_matter(tmp_path / REPORT)

    rt2 = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": model.url})
    rt2.clock.set(NOW + timedelta(minutes=5))
    actions.retry(rt2, run_id, from_step="GENERATE_REPORT")
    assert run_next(Worker(rt2, "w")).status is RunStatus.SUCCESS
    assert model.generations == 2  # one generation, no repair: what the v2 run did
    assert show(rt2, run_id).pinned["prompt_version"] == "v2"
    assert (tmp_path / REPORT).read_bytes() == first
