"""One rule for text from outside (issue 36, items 1 and 11), end to end: a model steered by a
commit message answers with a phishing link, a tracking pixel, a terminal title escape and a bidi
override. Before, the run ended SUCCESS with ``grounding: ok`` and the file, the run page and
Notion carried a live link and the raw escapes. Now the link is a grounding violation (repair,
then the builtin section), and whatever text is kept is inert in the file, the page, ``/api`` and
Notion; only a link into the project's own forge stays live."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from tests.fakes.fake_notion import FakeNotion
from tests.fakes.fake_ollama import FakeOllama
from tests.fakes.gitrepo import GitRepo
from tests.integration.test_report_workflow import SEOUL, platform_runtime, show
from tests.integration.test_report_workflow import repo as repo  # noqa: F401 - the fixture
from tests.integration.test_web import client
from tests.support import RuntimeFactory, drain, output_of, run_next

REPORT = "reports/platform/2026-09-29-platform-daily-summary.md"
PROBE = ("… [Click to re-authenticate](https://evil.example/phish) ![t](https://evil.example/track.png) "
         "\x1b]0;PWNED-TITLE\x07 \u202eevil")
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
FORGE = "https://git.example.com/team/platform"


def reply(summary: str) -> str:
    return (f"## Summary\n\n{summary}\n\n## Changes by area\n\n### engine\n\n- a.py changed\n\n"
            "## Notable commits\n\n- nothing stands out\n")


@pytest.fixture
def model() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


@pytest.fixture
def notion(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNotion]:
    monkeypatch.setenv("RF_TEST_NOTION", "secret_test_token")
    with FakeNotion(token="secret_test_token") as fake:
        yield fake


def live_links(markdown_text: str) -> list[str]:
    found = []
    for token in MarkdownIt("commonmark", {"html": True}).parse(markdown_text):
        for child in [token, *(token.children or [])]:
            if child.type in ("link_open", "image"):
                found.append(str(child.attrGet("href") or child.attrGet("src")))
            elif child.type in ("html_inline", "html_block"):
                found.append(child.content)
    return found


def notion_items(notion: FakeNotion, key: str) -> list[dict[str, Any]]:
    [page] = notion.live_pages(key)
    items: list[dict[str, Any]] = []
    for block in notion.content(page["id"]):
        items += block[block["type"]].get("rich_text", [])
    return items


def run_report(rt: Any) -> int:
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    outcome = Worker(rt, "w").run_one()
    assert outcome is not None and outcome.status is RunStatus.SUCCESS, outcome
    return result.run_id


def assert_inert_everywhere(rt: Any, run_id: int, file: Path, notion: FakeNotion | None) -> str:
    """The file, the run page, /api and Notion: no control or bidi character, no live link out of the forge."""
    text = file.read_text()
    assert not RAW.search(text), "the file holds raw escapes"
    assert all(link.startswith(FORGE + "/") for link in live_links(text)), live_links(text)
    web = client(rt)
    page = web.get(f"/runs/{run_id}").text
    assert not RAW.search(page)
    assert 'href="https://evil.example' not in page and "<img" not in page
    api = web.get(f"/api/runs/{run_id}")
    assert api.status_code == 200 and not RAW.search(json.dumps(api.json(), ensure_ascii=False))
    if notion is not None:
        items = notion_items(notion, "daily_report:platform:2026-09-29")
        assert not RAW.search("".join(i["text"]["content"] for i in items))
        assert all(i["text"]["link"] is None or i["text"]["link"]["url"].startswith(FORGE + "/") for i in items)
    return text


def test_a_phishing_link_from_the_model_is_repaired_away_and_nothing_of_it_is_live(
        sqlite_url: str, tmp_path: Path, repo: GitRepo, model: FakeOllama, notion: FakeNotion,
        runtime: RuntimeFactory) -> None:
    model.replies([reply(f"A calm day. {PROBE}"), reply(f"A calm day. {PROBE}")])
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": model.url},
                          notion=notion)
    run_id = run_report(rt)

    repair = model.requests_to("/api/chat")[1].body["messages"][-1]["content"]
    assert "links to https://evil.example/phish, which is not the project's own forge" in repair
    grounding = output_of(show(rt, run_id), 1)["grounding"]
    assert grounding["verdict"] == "fallback" and grounding["replaced"] == ["Summary"]
    assert [v.split(": ", 1)[1][:8] for v in grounding["violations"]] == ["links to"] * 4
    text = assert_inert_everywhere(rt, run_id, tmp_path / REPORT, notion)
    assert "evil" not in text and "- nothing stands out" in text  # the sections that held stay the model's


def test_what_a_prompt_without_the_check_lets_through_is_shown_as_text(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                                       model: FakeOllama, notion: FakeNotion,
                                                                       runtime: RuntimeFactory) -> None:
    """Prompt v2 has no grounding check: the model's words are saved, and still nothing in them is live."""
    model.replies([reply(f"A calm day. {PROBE}")])
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo,
                          llm={"provider": "ollama", "host": model.url, "prompt_version": "v2"},
                          notion=notion)
    run_id = run_report(rt)
    text = assert_inert_everywhere(rt, run_id, tmp_path / REPORT, notion)
    assert "\\[Click to re-authenticate\\](https\\://evil.example/phish)" in text
    assert "]0;PWNED-TITLE evil" in text
    page = client(rt).get(f"/runs/{run_id}").text
    assert "[Click to re-authenticate](https://evil.example/phish)" in page  # shown as written


def test_a_link_into_the_projects_own_forge_stays_live(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                       model: FakeOllama, notion: FakeNotion,
                                                       runtime: RuntimeFactory) -> None:
    repo.git("remote", "add", "origin", "git@git.example.com:team/platform.git")
    fix = f"{FORGE}/commit/{repo.head()}"
    model.replies([reply(f"See [the fix]({fix}).")])
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo, llm={"provider": "ollama", "host": model.url},
                          notion=notion)
    run_id = run_report(rt)
    run = show(rt, run_id)
    assert run.pinned["forge"] == FORGE and output_of(run, 1)["grounding"]["verdict"] == "ok"
    text = assert_inert_everywhere(rt, run_id, tmp_path / REPORT, notion)
    assert live_links(text) == [fix]
    assert f'<a href="{fix}">the fix</a>' in client(rt).get(f"/runs/{run_id}").text
    links = [i["text"]["link"]["url"] for i in notion_items(notion, "daily_report:platform:2026-09-29")
             if i["text"]["link"]]
    assert links == [fix]


def test_commit_text_shows_no_control_character_on_the_page_or_the_api(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                                       runtime: RuntimeFactory) -> None:
    """Item 11: the commit table and /api showed raw escapes, and ``&#x202E;`` became a real override."""
    from datetime import datetime

    repo.git("reset", "-q", "--hard", "HEAD~1")  # the branch as it stood at the 29th's end: no commit of the 30th
    repo.commit("fix \x1b[31mred\x07 \u202egnp.exe &#x202E;evil &lrm; see https://evil.example/x",
                at=datetime(2026, 9, 29, 12, 0, tzinfo=SEOUL), author=("Mallory\u202e \x1b]0;t\x07", "m@example.com"))
    rt = platform_runtime(runtime, sqlite_url, tmp_path, repo)
    run_id = run_report(rt)
    text = assert_inert_everywhere(rt, run_id, tmp_path / REPORT, None)
    assert "`&#x202E;evil`" in text and "`https://evil.example/x`" in text  # as written, inert (text rules 3)
    page = client(rt).get(f"/runs/{run_id}").text
    assert "gnp.exe &amp;#x202E;evil" in page  # the table and the report show the reference as written
    stored = output_of(show(rt, run_id), 0)["commits"]
    assert any("\u202e" in c["subject"] for c in stored)  # the step output stays what git said


ACTOR = "x[/] \x1b]0;T\x07 [admin](https://evil.example/a) \u202e"


def test_the_ops_report_shows_a_hostile_actor_and_the_models_summary_as_text(
        sqlite_url: str, tmp_path: Path, repo: GitRepo, model: FakeOllama) -> None:
    """Item 15 (the ops report part): ``$USER`` reached the ops report raw, a live link and escapes."""
    import dataclasses
    from datetime import datetime, timedelta

    from engine.core.clock import ManualClock
    from engine.scheduling import definitions
    from tests.integration.test_ops_report import NOW
    from tests.support import make_runtime

    extra = {"projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"]}],
             "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "ollama", "host": model.url}}
    specs = [dict(name="ops-weekly", workflow="ops_weekly_report", cron="0 6 * * 1", timezone="Asia/Seoul"),
             dict(name="echo-tick", workflow="echo", project="platform", cron="0 9 * * *", timezone="UTC")]
    rt = make_runtime(sqlite_url, schedules=specs, clock=ManualClock(NOW - timedelta(days=5)), extra=extra)
    definitions.apply(rt)
    rt.clock.set(datetime(2026, 10, 2, 12, 0, tzinfo=SEOUL))
    definitions.set_schedule(dataclasses.replace(rt, actor=ACTOR), "echo-tick", expect_version=1,
                             changes={"cron": "0 10 * * *"}, confirmed=True)
    rt.clock.set(NOW)
    model.replies([json.dumps({"summary": f"All calm. {PROBE}"})] * 2)
    ops = actions.trigger(rt, "ops-weekly", day=date(2026, 9, 28))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    [file] = (tmp_path / "reports" / "_ops").rglob("*.md")
    text = file.read_text()
    assert not RAW.search(text) and live_links(text) == []
    assert "changed echo-tick" in text and "x[/]" in text and "`[admin](https://evil.example/a)`" in text
    assert output_of(show(rt, ops.run_id), 1)["grounding"]["verdict"] == "fallback"
    page = client(rt).get(f"/runs/{ops.run_id}").text
    assert not RAW.search(page) and 'href="https://evil.example' not in page


def test_a_team_report_makes_the_models_text_inert_too(sqlite_url: str, tmp_path: Path, model: FakeOllama,
                                                       runtime: RuntimeFactory) -> None:
    from tests.integration.test_team_report import team_runtime

    model.replies([reply(f"A calm day. {PROBE}")] * 2)
    rt = team_runtime(runtime, sqlite_url, tmp_path,
                      llm={"provider": "ollama", "host": model.url, "prompt_version": "v2"})
    result = actions.trigger(rt, "core-daily", day=date(2026, 9, 29))
    drain(Worker(rt, "w"))
    [file] = (tmp_path / "reports" / "_team").rglob("*.md")
    text = file.read_text()
    assert not RAW.search(text) and live_links(text) == []
    assert "\\[Click to re-authenticate\\](https\\://evil.example/phish)" in text
    assert show(rt, result.run_id).status is RunStatus.SUCCESS
