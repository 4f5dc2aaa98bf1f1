"""Changes by kind: Conventional Commits read by their type, other commits by the documented heuristic; the
expectations are written out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from steps import change_kinds
from steps.git_log import CommitInfo, FileChange


def commit(subject: str, *paths: str, body: str = "") -> CommitInfo:
    return CommitInfo(sha="0" * 40, author_name="A", author_email="a@example.com", authored_at="2026-11-02T00:00:00Z",
                      subject=subject, body=body, files=[FileChange(path=p, insertions=1, deletions=0) for p in paths],
                      insertions=len(paths), deletions=0)


@pytest.mark.parametrize(("subject", "paths", "body", "kind"), [
    ("feat(api): orders endpoint", ["src/api.py"], "", "features"),
    ("fix: retry header", ["src/http.py"], "", "fixes"),
    ("perf(db)!: drop the cache", ["src/db.py"], "", "breaking"),  # the bang wins over the type
    ("refactor: split the store", ["src/store.py"], "BREAKING CHANGE: Store.open is gone", "breaking"),
    ("docs: guide", ["README.md"], "", "docs"),
    ("test: cover the parser", ["tests/test_parse.py"], "", "tests"),
    ("ci: cache pip", [".github/workflows/ci.yml"], "", "build"),
    ("build(deps): bump idna", ["requirements.txt"], "", "build"),
    ("chore: tidy", ["src/a.py"], "", "other"),
    ("Fix the login redirect", ["src/login.py"], "", "fixes"),
    ("Fixed a typo in the header", ["src/header.py"], "", "fixes"),
    ("Add a dark theme", ["src/theme.css"], "", "features"),
    ("Adds paging to the list", ["src/list.py"], "", "features"),
    ("Optimize the claim query", ["src/claim.py"], "", "performance"),
    ("Update the install guide", ["docs/install.md", "README.md"], "", "docs"),
    ("More cases for the parser", ["tests/test_parse.py", "tests/data/x.json"], "", "tests"),
    ("Pin the runner image", [".gitlab-ci.yml", "Dockerfile"], "", "build"),
    ("Rework the scheduler", ["src/scheduler.py", "docs/design.md"], "", "other"),
    ("Remove the v1 API (BREAKING)", ["src/api.py"], "", "breaking"),
    ("Merge branch 'x'", [], "", "other"),
])
def test_each_commit_gets_its_kind(subject: str, paths: list[str], body: str, kind: str) -> None:
    assert change_kinds.kind_of(commit(subject, *paths, body=body)) == kind


def test_a_projects_own_words_name_kinds_and_bad_rules_are_refused() -> None:
    assert change_kinds.kind_of(commit("Hotpatch the billing job", "src/billing.py")) == "other"
    assert change_kinds.kind_of(commit("Hotpatch the billing job", "src/billing.py"),
                                {"fixes": ["hotpatch"]}) == "fixes"
    with pytest.raises(ValueError, match="not a kind"):
        change_kinds.check_rules({"breaking": ["boom"]})
    with pytest.raises(ValueError, match="one word"):
        change_kinds.check_rules({"fixes": ["two words"]})


def test_groups_come_breaking_first_and_keep_the_order_given(tmp_path: Path) -> None:
    commits = [commit("fix: a"), commit("feat: b"), commit("feat!: c"), commit("fix: d")]
    groups = change_kinds.group(commits)
    assert list(groups) == ["breaking", "features", "fixes"]
    assert [c.subject for c in groups["fixes"]] == ["fix: a", "fix: d"]
