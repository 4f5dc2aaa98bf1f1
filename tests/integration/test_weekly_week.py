"""A weekly that is weekly (layout 3), end to end on a built repository: the day-by-day line, this week
against last week (read from git at the pinned heads), and what was merged this week, under either
attribution; a quiet week says "no commits"; a weekly pinned with layout 2 renders as it did."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from markdown_it import MarkdownIt

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.scheduling import definitions
from engine.store import run_rows
from tests.fakes.gitrepo import GitRepo, make_repo
from tests.support import make_runtime, output_of, run_next

SEOUL = ZoneInfo("Asia/Seoul")
ALICE = ("Alice Kim", "alice@example.com")
BOB = ("Bob Lee", "bob@example.com")
BOT = ("dependabot[bot]", "49699333+dependabot[bot]@users.noreply.github.com")


def seoul(day: int, hour: int = 10, month: int = 9) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=SEOUL)


def build(tmp_path: Path) -> GitRepo:
    """W39 (21–27 Sep): two commits by Alice in src/shop/cart, one by a bot. W40 (28 Sep – 4 Oct): Alice on
    Monday in docs, Bob's branch (two commits, Tuesday) merged on Wednesday, Alice on Friday in src/shop/cart."""
    repo = make_repo(tmp_path)
    repo.commit("Start the cart", at=seoul(22), files={"src/shop/cart/core.py": "a = 1\n"}, author=ALICE)
    repo.commit("Cart totals", at=seoul(23), files={"src/shop/cart/core.py": "a = 2\n"}, author=ALICE)
    repo.commit("Bump idna", at=seoul(24), files={"requirements.txt": "idna\n"}, author=BOT)
    repo.commit("Guide (#12)", at=seoul(28), files={"docs/guide.md": "guide\n"}, author=ALICE)
    repo.checkout("feature", create=True)
    repo.commit("Payments API", at=seoul(29, 9), files={"src/shop/pay/api.py": "p = 1\n"}, author=BOB)
    repo.commit("Payments tests", at=seoul(29, 11), files={"tests/test_pay.py": "t = 1\n"}, author=BOB)
    repo.checkout("main")
    repo.merge("feature", at=seoul(30), message="Merge pull request #14 from bob/feature")
    repo.commit("Cart discounts", at=seoul(2, month=10), files={"src/shop/cart/core.py": "a = 3\n"}, author=ALICE)
    return repo


def weekly(url: str, tmp_path: Path, repo: GitRepo, *, day: date = date(2026, 10, 1), language: str = "en",
           attribution: str = "authored") -> str:
    extra: dict[str, Any] = {
        "projects": [{"key": "shop", "repo": str(repo.path), "branches": ["main"], "on_empty": "report"}],
        "reports": {"dir": str(tmp_path / "reports"), "language": language},
        "llm": {"provider": "builtin"},
    }
    spec = dict(name="shop-weekly", workflow="weekly_report", project="shop", cron="0 9 * * 1",
                timezone="Asia/Seoul", attribution=attribution)
    rt = make_runtime(url, schedules=[spec], clock=ManualClock(datetime(2026, 10, 5, tzinfo=UTC)), extra=extra)
    definitions.apply(rt)
    rt.clock.set(datetime(2026, 10, 20, tzinfo=UTC))
    result = actions.trigger(rt, "shop-weekly", day=day)
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, result.run_id)
    return str(output_of(run, 1)["text"])


def visible(markdown: str) -> str:
    """The text a reader sees: the rendered HTML without its tags."""
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    inline = re.sub(r"</?(a|code|strong|em)\b[^>]*>", "", html)
    return " ".join(re.sub(r"<[^>]+>", " ", inline).split())


def week(text: str, heading: str = "This week") -> str:
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_week_day_by_day_against_last_week_and_merged(sqlite_url: str, tmp_path: Path) -> None:
    repo = build(tmp_path)
    merge = repo.head("main~1")
    text = week(weekly(sqlite_url, tmp_path, repo))
    seen = visible(text)
    assert "Day by day (commits by author date): Mon 1 · Tue 2 · Wed 0 · Thu 0 · Fri 1 · Sat 0 · Sun 0" in seen
    # Last week: three commits, by one person (the bot is no author), whose work was all in src/shop/cart.
    assert "| Commits | 4 | 3 | +1 |" in text
    assert "| Authors | 2 | 1 | +1 |" in text
    assert "| Area: src/shop/cart | 1 | 2 | -1 |" in text
    assert "| Area: src/shop/pay | 1 | 0 | +1 |" in text
    assert "Last week (2026-W39)" in seen
    assert f"`{merge[:8]}` Merge pull request #14 from bob/feature (Alice Kim): brought 2 commits" in text
    assert "\\" not in text


def test_landed_places_last_week_and_the_merges_by_the_branch(sqlite_url: str, tmp_path: Path) -> None:
    repo = build(tmp_path)
    text = week(weekly(sqlite_url, tmp_path, repo, attribution="landed"))
    assert "| Commits | 4 | 3 | +1 |" in text
    assert "Merge pull request #14 from bob/feature (Alice Kim): brought 2 commits" in text


def test_a_quiet_week_says_no_commits_plainly_with_last_weeks_figures(sqlite_url: str, tmp_path: Path) -> None:
    repo = build(tmp_path)
    text = weekly(sqlite_url, tmp_path, repo, day=date(2026, 10, 8))
    seen = visible(text)
    assert "No commits were authored in shop in this report's window." in seen
    assert "Last week (2026-W40): 4 commits by 2 authors." in seen


def test_the_korean_week(sqlite_url: str, tmp_path: Path) -> None:
    repo = build(tmp_path)
    text = week(weekly(sqlite_url, tmp_path, repo, language="ko"), "이번 주")
    assert "월 1 · 화 2 · 수 0 · 목 0 · 금 1 · 토 0 · 일 0" in text
    assert "| 커밋 | 4 | 3 | +1 |" in text and "### 이번 주 병합" in text and "커밋 2개 병합" in text
