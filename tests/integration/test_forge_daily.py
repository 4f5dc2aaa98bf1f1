"""A daily of a project whose forge is GitHub (layout 6), end to end against a loopback fake forge: the merged pull
requests with their titles, authors and reviewers, reviews per person and the issues closed; the view pinned in
COLLECT_GIT's output, so a retry shows the same titles with the forge changed or down; no token: one line, and
git's view; a hostile title stays inert; a rate limit is held in the store's shared limit; a run pinned at
layout 5 neither asks the forge nor changes."""

from __future__ import annotations

import html as html_module
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from markdown_it import MarkdownIt
from sqlalchemy import select

from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.runtime import Runtime
from engine.store import run_rows
from engine.store.tables import rate_limits
from steps import forge_api
from tests.fakes.fake_forge import FakeForge
from tests.fakes.gitrepo import GitRepo, make_repo
from tests.integration.test_weekly_week import visible
from tests.support import ManualRuntime, RuntimeFactory, output_of, run_next
from workflows import report_settings

SEOUL = ZoneInfo("Asia/Seoul")
TOKEN_ENV = "SHOP_FORGE_TOKEN"
BOB, CAROL = ("Bob Lee", "bob@example.com"), ("Carol Park", "carol@example.com")
HOSTILE = "Fix totals <img src=x onerror=alert(1)> [win](https://evil.example/x) \u202eevil #13"


def seoul(day: int, hour: int) -> datetime:
    return datetime(2026, 9, day, hour, tzinfo=SEOUL)


def build(tmp_path: Path) -> tuple[GitRepo, str, str]:
    """Main with a commit on the 29th; on the 30th two branches merged by pull request (#14 and #15)."""
    repo = make_repo(tmp_path)
    repo.git("remote", "add", "origin", "https://github.com/acme/shop.git")
    repo.commit("Start the cart", at=seoul(29, 10), files={"src/shop/cart.py": "a = 1\n"})
    repo.checkout("payments", create=True)
    repo.commit("Payments API", at=seoul(30, 9), files={"src/shop/pay.py": "p = 1\n"}, author=BOB)
    repo.checkout("main")
    first = repo.merge("payments", at=seoul(30, 12), message="Merge pull request #14 from bob/payments")
    repo.checkout("totals", create=True)
    repo.commit("Fix cart totals", at=seoul(30, 10), files={"src/shop/cart.py": "a = 2\n"}, author=CAROL)
    repo.checkout("main")
    second = repo.merge("totals", at=seoul(30, 15), message="Merge pull request #15 from carol/totals")
    return repo, first, second


def seed(forge: FakeForge, first: str, second: str, *, title_15: str = "Fix cart totals") -> None:
    forge.add_pull(14, "Payments API", "bob", updated_at=seoul(30, 12), merged_at=seoul(30, 12), merge_sha=first,
                   labels=("feature",), body="Closes #12")
    forge.add_pull(15, title_15, "carol", updated_at=seoul(30, 15), merged_at=seoul(30, 15), merge_sha=second)
    forge.review(14, "alice", "APPROVED")
    forge.review(14, "dave", "COMMENTED")
    forge.review(15, "alice", "CHANGES_REQUESTED")
    forge.review(15, "alice", "APPROVED")
    forge.add_issue(12, "Checkout fails on Safari", "erin", closed_at=seoul(30, 12))


def shop_runtime(runtime: RuntimeFactory, url: str, tmp_path: Path, repo: GitRepo, forge: FakeForge) -> ManualRuntime:
    """The ``shop`` daily report (commits as they landed, and the forge's view of them), applied on 5 October."""
    extra: dict[str, Any] = {
        "projects": [{"key": "shop", "repo": str(repo.path), "branches": ["main"], "on_empty": "report",
                      "forge": {"api": forge.api, "token_env": TOKEN_ENV, "cache_dir": str(tmp_path / "cache")}}],
        "reports": {"dir": str(tmp_path / "reports")},
        "llm": {"provider": "builtin"},
    }
    spec = dict(name="shop-daily", workflow="daily_report", project="shop", cron="0 19 * * *",
                timezone="Asia/Seoul", attribution="landed")
    return runtime(url, schedules=[spec], at=datetime(2026, 10, 5, tzinfo=UTC), config=extra, apply=True)


def run_daily(rt: Runtime, *, day: date = date(2026, 9, 30)) -> int:
    result = actions.trigger(rt, "shop-daily", day=day)
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    return result.run_id


def report_of(rt: Runtime, run_id: int) -> tuple[str, dict[str, Any]]:
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, run_id)
    return str(output_of(run, 1)["text"]), dict(run.steps[0].output or {})


def section(text: str, heading: str) -> str:
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_daily_names_both_merged_pull_requests_with_their_reviewers(sqlite_url: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        runtime: RuntimeFactory) -> None:
    repo, first, second = build(tmp_path)
    monkeypatch.setenv(TOKEN_ENV, "ghp_daily_token")
    with FakeForge("github", token="ghp_daily_token") as forge:
        seed(forge, first, second)
        rt = shop_runtime(runtime, sqlite_url, tmp_path, repo, forge)
        text, collected = report_of(rt, run_daily(rt))
    merged = section(text, "Merged")
    assert ("- [#14](https://github.com/acme/shop/pull/14) Payments API (by bob; reviewed by alice, dave; "
            "approved by alice; labels: feature; closes [#12](https://github.com/acme/shop/issues/12)), "
            f"[`{first[:8]}`](https://github.com/acme/shop/commit/{first})") in merged
    assert "- [#15](https://github.com/acme/shop/pull/15) Fix cart totals (by carol; reviewed by alice; approved by alice)" in merged
    assert "Merge pull request #14" not in merged  # the pull request names the merge it came by
    reviews = section(text, "Reviews")
    assert "- alice: reviewed 2 pull requests ([#14](https://github.com/acme/shop/pull/14), " in reviews
    assert "approved 2" in reviews and "- dave: reviewed 1 pull request" in reviews
    assert "Checkout fails on Safari (erin), closed 2026-09-30 12:00" in section(text, "Issues closed")
    assert [p["number"] for p in collected["forge_view"]["pulls"]] == [14, 15]  # pinned with the commits


def test_a_retry_shows_the_pinned_titles_with_the_forge_changed_and_then_down(sqlite_url: str, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch,
                                                                              runtime: RuntimeFactory) -> None:
    repo, first, second = build(tmp_path)
    monkeypatch.setenv(TOKEN_ENV, "ghp_daily_token")
    with FakeForge("github", token="ghp_daily_token") as forge:
        seed(forge, first, second)
        rt = shop_runtime(runtime, sqlite_url, tmp_path, repo, forge)
        run_id = run_daily(rt)
        before, _ = report_of(rt, run_id)
        asked = len(forge.requests)
        forge.pulls[15].title = "Renamed after the report"
        forge.fail_next(100, 503)
        actions.retry(rt, run_id, from_step="GENERATE_REPORT")
        assert Worker(rt, "w").run_one().status is RunStatus.SUCCESS  # type: ignore[union-attr]
        after, _ = report_of(rt, run_id)
    assert len(forge.requests) == asked  # the forge was not asked again
    assert after == before and "Fix cart totals (by carol" in after and "Renamed" not in after


def test_without_a_token_one_line_says_so_and_git_names_the_merges(sqlite_url: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   runtime: RuntimeFactory) -> None:
    repo, first, second = build(tmp_path)
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with FakeForge("github") as forge:
        seed(forge, first, second)
        rt = shop_runtime(runtime, sqlite_url, tmp_path, repo, forge)
        text, _ = report_of(rt, run_daily(rt))
    assert forge.requests == []
    notes = [line for line in text.splitlines() if "forge was not read" in line]
    assert notes == [f"> **Note:** the forge was not read (the variable {TOKEN_ENV} is not set); pull requests "
                     "and issues are named from git only."]
    merged = section(text, "Merged")
    assert "Merge pull request #14 from bob/payments (Alice Kim): brought 1 commit" in merged
    assert "## Reviews" not in text and "## Issues closed" not in text


def test_a_hostile_title_is_inert_like_commit_text(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   runtime: RuntimeFactory) -> None:
    repo, first, second = build(tmp_path)
    monkeypatch.setenv(TOKEN_ENV, "ghp_daily_token")
    with FakeForge("github", token="ghp_daily_token") as forge:
        seed(forge, first, second, title_15=HOSTILE)
        rt = shop_runtime(runtime, sqlite_url, tmp_path, repo, forge)
        text, _ = report_of(rt, run_daily(rt))
    line = next(x for x in section(text, "Merged").splitlines() if "pull/15" in x)
    assert "\u202e" not in text
    html = MarkdownIt("commonmark").render(line)
    assert "<img" not in html and 'href="https://evil' not in html  # no live image, no link out
    shown = html_module.unescape(visible(line))
    assert "<img src=x onerror=alert(1)>" in shown and "[win](https://evil.example/x)" in shown
    assert "[#13](https://github.com/acme/shop/issues/13)" in line  # its reference links to the project's forge


def test_a_rate_limit_waits_in_the_store_s_shared_limit(sqlite_url: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        runtime: RuntimeFactory) -> None:
    repo, first, second = build(tmp_path)
    monkeypatch.setenv(TOKEN_ENV, "ghp_daily_token")
    with FakeForge("github", token="ghp_daily_token") as forge:
        seed(forge, first, second)
        forge.rate_limit_next(1, reset_in_s=40)
        rt = shop_runtime(runtime, sqlite_url, tmp_path, repo, forge)
        started = rt.clock.now()
        text, _ = report_of(rt, run_daily(rt))
        name = forge_api.limit_name(forge.api, "ghp_daily_token")
    assert "Payments API (by bob" in text
    assert (rt.clock.now() - started).total_seconds() >= 39  # the run waited for the reset
    with rt.store.read() as conn:
        held = conn.execute(select(rate_limits.c.next_at).where(rate_limits.c.name == name)).scalar_one()
    assert (held - started).total_seconds() >= 39  # every worker on this store waits for it too


def test_a_run_pinned_at_layout_5_neither_asks_the_forge_nor_changes(sqlite_url: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     runtime: RuntimeFactory) -> None:
    repo, first, second = build(tmp_path)
    monkeypatch.setenv(TOKEN_ENV, "ghp_daily_token")
    monkeypatch.setattr(report_settings, "LAYOUT", 5)
    with FakeForge("github", token="ghp_daily_token") as forge:
        seed(forge, first, second)
        rt = shop_runtime(runtime, sqlite_url, tmp_path, repo, forge)
        text, collected = report_of(rt, run_daily(rt))
    assert forge.requests == [] and collected.get("forge_view") is None
    assert "Merge pull request #14 from bob/payments (Alice Kim)" in section(text, "Merged")
    assert "## Reviews" not in text and "forge" not in text.lower().replace("github.com", "")
