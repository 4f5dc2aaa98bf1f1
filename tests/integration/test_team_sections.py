"""The team report by repository and by person (layout 3), on two built repositories with a src layout,
a bot, ``#N`` references and GitHub remotes: each repository's own areas and busiest files under
paths prefixed with its name, never summed; a section per person when the team names authors; a
missing project named in the summary; a Korean report whose fixed words are all Korean. Each report
is rendered with markdown-it-py and its visible text compared with the facts."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from markdown_it import MarkdownIt

from engine.core.clock import ManualClock
from engine.execution.worker import Worker
from engine.operations import actions
from engine.plugins.workflow_registry import load_registry
from engine.scheduling import definitions
from tests.fakes.gitrepo import GitRepo, make_repo
from tests.support import drain, make_runtime
from workflows import team_report

SEOUL = ZoneInfo("Asia/Seoul")
DAY = datetime(2026, 9, 29, 9, 0, tzinfo=SEOUL)
ALICE = ("Alice Kim", "alice@example.com")
BOB = ("Bob Lee", "bob@example.com")
BOT = ("dependabot[bot]", "49699333+dependabot[bot]@users.noreply.github.com")
KEY = "2026-09-29"


def build(tmp_path: Path) -> dict[str, GitRepo]:
    """flask and requests, both src-layout with a CHANGES.rst; Alice in both, Bob in flask, a bot in requests."""
    flask = make_repo(tmp_path, "flask")
    flask.git("remote", "add", "origin", "git@github.com:pallets/flask.git")
    flask.commit("Fix the app context (#5501)", at=DAY, author=ALICE,
                 files={"src/flask/app.py": "a = 1\n", "tests/test_app.py": "t = 1\n" * 30})
    flask.commit("Note the fix", at=DAY + timedelta(hours=1), author=BOB, files={"CHANGES.rst": "fix\n"})
    requests = make_repo(tmp_path, "requests")
    requests.git("remote", "add", "origin", "https://github.com/psf/requests.git")
    requests.commit("Retry on 503 (#7497)", at=DAY + timedelta(hours=2), author=ALICE,
                    files={"src/requests/adapters.py": "r = 1\n", "CHANGES.rst": "retry\n"})
    requests.commit("Bump urllib3", at=DAY + timedelta(hours=3), author=BOT, files={"requirements.txt": "u\n"})
    return {"flask": flask, "requests": requests}


def team_text(url: str, tmp_path: Path, *, language: str = "en", authors: list[str] | None = None,
              away: str | None = None) -> str:
    repos = build(tmp_path)
    if away:
        shutil.move(repos[away].path, tmp_path / f"{away}-away")
    extra: dict[str, Any] = {
        "projects": [{"key": name, "repo": str(repo.path), "branches": ["main"]} for name, repo in repos.items()],
        "reports": {"dir": str(tmp_path / "reports"), "language": language}, "llm": {"provider": "builtin"}}
    spec: dict[str, Any] = dict(name="core-daily", workflow="team_daily_report", project="core", cron="0 3 * * *",
                                timezone="Asia/Seoul", projects="*", authors=authors or [])
    registry = {**load_registry(), "team_daily_report": team_report.DAILY, "team_project": team_report.CHILD}
    now = datetime(2026, 9, 30, 1, tzinfo=UTC)
    rt = make_runtime(url, schedules=[spec], clock=ManualClock(now - timedelta(days=1)), registry=registry,
                      extra=extra)
    definitions.apply(rt)
    rt.clock.set(now)
    actions.trigger(rt, "core-daily", day=date(2026, 9, 29))
    drain(Worker(rt, "w"))
    text = (tmp_path / "reports" / "_team" / f"{KEY}-core-daily-summary.md").read_text()
    return text.split("\n---\n", 1)[1]


def visible(markdown: str) -> str:
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    inline = re.sub(r"</?(a|code|strong|em)\b[^>]*>", "", html)
    return " ".join(re.sub(r"<[^>]+>", " ", inline).split())


def part(text: str, start: str, end: str = "\n### ") -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def test_each_repository_has_its_own_areas_and_files_never_summed(sqlite_url: str, tmp_path: Path) -> None:
    text = team_text(sqlite_url, tmp_path)
    flask = part(text, "### flask\n", "\n### requests")
    requests = part(text, "### requests\n", "\n## ")
    seen_flask, seen_requests = visible(flask), visible(requests)
    assert "2 commits by Alice Kim, Bob Lee." in seen_flask
    assert "flask/src/flask 1 1 +1 −0" in seen_flask  # the fix's area is its source, not its larger test
    assert "flask/CHANGES.rst 1 +1 −0" in seen_flask and "requests/CHANGES.rst" not in seen_flask
    assert "requests/CHANGES.rst 1 +1 −0" in seen_requests and "flask/" not in seen_requests
    assert "2 commits by Alice Kim, dependabot[bot]." in seen_requests
    # The overall statistics keep the two CHANGES.rst apart too.
    stats = visible(part(text, "## Statistics\n", "\n## Projects"))
    assert "flask/CHANGES.rst 1" in stats and "requests/CHANGES.rst 1" in stats and " CHANGES.rst 2" not in stats
    # Commits and references link to each repository's own forge.
    sha = GitRepo(tmp_path / "flask").head()
    assert f"(https://github.com/pallets/flask/commit/{sha})" in flask
    assert "[#5501](https://github.com/pallets/flask/issues/5501)" in flask
    assert "[#7497](https://github.com/psf/requests/issues/7497)" in requests
    assert "## People" not in text and "\\" not in text


def test_a_team_with_authors_has_a_section_per_person_across_repositories(sqlite_url: str, tmp_path: Path) -> None:
    text = team_text(sqlite_url, tmp_path, authors=["Alice Kim"])
    people = visible(text.split("\n## People\n", 1)[1])
    assert people.startswith("Alice Kim flask: 1 commit; requests: 1 commit.")
    assert "flask " in people and "Fix the app context (#5501)" in people and "Retry on 503 (#7497)" in people
    assert "Bob Lee" not in text and "Bump urllib3" not in text


def test_a_missing_project_is_named_in_the_summary(sqlite_url: str, tmp_path: Path) -> None:
    text = team_text(sqlite_url, tmp_path, away="requests")
    summary = visible(part(text, "## Summary\n", "\n## "))
    assert summary.startswith("Not collected: requests (GIT_REPO_NOT_FOUND); this report leaves them out.")


def test_a_korean_team_report_by_repository_and_person(sqlite_url: str, tmp_path: Path) -> None:
    text = team_text(sqlite_url, tmp_path, language="ko", authors=["Alice Kim", "Bob Lee"], away="requests")
    seen = visible(text)
    assert "## 사람별" in text and "#### 영역별" in text and "#### 변경이 잦은 파일" in text
    assert "수집되지 않음: requests (GIT_REPO_NOT_FOUND). 이 보고서에는 빠져 있습니다." in seen
    assert "flask: 커밋 1개." in seen
    english = ("Projects", "People", "Not collected", "No commits", "commits by", "Summary", "Statistics",
               "Written by", "Areas", "Busiest", "Commits", "commit")
    assert [word for word in english if word in seen] == []


def test_one_commit_is_one_commit(sqlite_url: str, tmp_path: Path) -> None:
    text = team_text(sqlite_url, tmp_path, authors=["Alice Kim"])
    assert "1 commit by Alice Kim." in visible(part(text, "### flask\n", "\n### requests"))
