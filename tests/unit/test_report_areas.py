"""The builtin report's areas and statistics on a real repository: one entry per commit,
and generated, vendored or excluded paths left out of the numbers."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from steps.collect_git import collect
from steps.excluded_files import exclude_matches
from steps.generate_report import BuiltinWriter, ReportInput, generate
from steps.report_model import ReportStats
from tests.fakes.gitrepo import GitRepo, make_repo

SEOUL = ZoneInfo("Asia/Seoul")
DAY = datetime(2026, 9, 29, tzinfo=SEOUL)


def at(hour: int) -> datetime:
    return DAY + timedelta(hours=hour)


def lines_of(n: int, tag: str = "x") -> str:
    return "".join(f"{tag}{i}\n" for i in range(n))


def report(repo: GitRepo, exclude: list[str] | None = None, layout: int = 1,
           **collect_args: Any) -> tuple[str, ReportStats]:
    out = collect(repo.path, ["main"], DAY, DAY + timedelta(days=1), exclude=exclude, **collect_args)
    inp = ReportInput(workflow="daily_report", project="platform", business_key="2026-09-29",
                      window_start=out.window_start, window_end=out.window_end, timezone="Asia/Seoul",
                      commits=out.commits, prompt_version="v2", layout=layout)
    result = generate(inp, BuiltinWriter(), num_ctx=8192, options={})
    return result.text, ReportStats.model_validate(result.stats)


def section(text: str, heading: str) -> str:
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_each_commit_is_listed_once_under_the_area_with_most_changed_lines(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    wide = repo.commit("Wide change", at=at(9), files={"engine/a.py": lines_of(10), "steps/b.py": lines_of(2),
                                                       "docs/c.md": lines_of(1)})
    tied = repo.commit("Tied change", at=at(10), files={"steps/d.py": lines_of(3), "docs/e.md": lines_of(3)})
    text, stats = report(repo, exclude=[])
    areas = section(text, "Changes by area")
    assert areas.count(wide[:8]) == 1 and areas.count(tied[:8]) == 1
    assert wide[:8] in areas.split("### engine\n")[1].split("###")[0]
    assert tied[:8] in areas.split("### docs\n")[1].split("###")[0]  # a tie goes to the first name
    assert "### steps" not in areas  # no commit's main area: no empty heading
    assert {a.area: a.commits for a in stats.areas} == {"engine": 1, "steps": 2, "docs": 2}


def test_the_summary_and_the_areas_table_say_which_count_they_give(tmp_path: Path) -> None:
    """The summary counts each commit once, under its main area; the table every commit touching an area.
    Both numbers are right, and each says which (before layout 5: "engine (2 commits)" beside a table's 3)."""
    repo = make_repo(tmp_path)
    repo.commit("Engine and its test", at=at(9), files={"engine/a.py": lines_of(10), "tests/t.py": lines_of(2)})
    repo.commit("Engine again", at=at(10), files={"engine/b.py": lines_of(5), "tests/u.py": lines_of(1)})
    repo.commit("A test alone", at=at(11), files={"tests/v.py": lines_of(4)})
    text, stats = report(repo, exclude=[], layout=5)
    assert {a.area: a.commits for a in stats.areas} == {"engine": 2, "tests": 3}
    assert "Most of the work was in engine and tests (2 and 1 commits mainly there)." in text
    assert "| Area | Commits touching it | Files | Insertions | Deletions |" in text
    assert "| tests | 3 |" in text and "| engine | 2 |" in text
    before, _ = report(repo, exclude=[], layout=4)  # a run pinned before keeps its words
    assert "Most of the work was in engine (2 commits) and tests (1 commit)." in before
    assert "| Area | Commits | Files |" in before


def test_generated_vendored_and_excluded_paths_count_nowhere(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("Mark third-party code", at=at(8), files={
        ".gitattributes": "third_party/** linguist-vendored\n*.pb.go linguist-generated=true\n"
                          "docs/api.md linguist-generated=false\n"})
    repo.commit("Vendor a virtualenv", at=at(9), files={".venv/lib/site.py": lines_of(900)})
    repo.commit("Vendor a library", at=at(10), files={"third_party/lib/x.js": lines_of(500)})
    generated = repo.commit("Regenerate protos", at=at(11), files={"api/gen/service.pb.go": lines_of(300),
                                                                   "api/service.proto": lines_of(4)})
    real = repo.commit("Fix the parser", at=at(12), files={"src/parser.py": lines_of(40),
                                                           "docs/api.md": lines_of(2)})
    text, stats = report(repo, exclude=[".venv/"])

    assert stats.commits == 5
    assert (stats.files_changed, stats.insertions) == (4, 3 + 4 + 40 + 2)  # .gitattributes, proto, parser, api.md
    assert {a.area for a in stats.areas} == {"(root)", "api", "src", "docs"}
    assert all(".venv" not in f.path and "third_party" not in f.path and ".pb.go" not in f.path
               for f in stats.busiest_files)
    summary = section(text, "Summary")
    assert f"The largest change was `{real[:8]}` “Fix the parser” (+42 / −0)." in summary
    notable = section(text, "Notable commits").splitlines()[1]
    assert notable.startswith(f"- `{real[:8]}`")
    areas = section(text, "Changes by area")
    assert f"`{generated[:8]}` Regenerate protos (Alice Kim, +4 / −0)" in areas
    only_excluded = areas.split("### Generated, vendored or excluded files only\n")[1]
    assert "Vendor a virtualenv" in only_excluded and "Vendor a library" in only_excluded


def test_attributes_are_read_at_the_pinned_head_not_the_work_tree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("Vendor", at=at(9), files={".gitattributes": "vendor/** linguist-vendored\n",
                                           "vendor/big.c": lines_of(200), "src/a.c": lines_of(5)})
    pinned = repo.head()
    repo.commit("Unmark vendor", at=at(10), files={".gitattributes": "# nothing\n"})
    (repo.path / ".gitattributes").write_text("src/** linguist-generated\n")  # uncommitted
    _, stats = report(repo, exclude=[], pinned_heads={"main": pinned})
    assert (stats.commits, stats.files_changed, stats.insertions) == (1, 2, 1 + 5)


def test_runs_pinned_before_exclusion_existed_count_every_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("Vendor", at=at(9), files={".gitattributes": "vendor/** linguist-vendored\n",
                                           "vendor/big.c": lines_of(200)})
    _, stats = report(repo, exclude=None)
    assert (stats.files_changed, stats.insertions) == (2, 201)


def test_exclude_globs() -> None:
    assert exclude_matches("vendor/a/b.js", ["vendor/*"])
    assert exclude_matches("pkg/yarn.lock", ["*.lock"]) and not exclude_matches("pkg/lock.py", ["*.lock"])
    assert exclude_matches(".venv/lib/x.py", [".venv/"]) and exclude_matches("tools/.venv/x.py", [".venv/"])
    assert not exclude_matches("src/venv.py", [".venv/"])
    assert not exclude_matches("docs/readme.md", [])


def test_a_gitattributes_deep_in_the_tree_marks_its_own_files(tmp_path: Path) -> None:
    """Only the root has no attributes file: the one in services/api/gen is found and applies there alone."""
    repo = make_repo(tmp_path)
    repo.commit("Generated client", at=at(9), files={"services/api/gen/.gitattributes": "*.py linguist-generated\n",
                                                     "services/api/gen/client.py": lines_of(300),
                                                     "services/web/client.py": lines_of(7)})
    _, stats = report(repo, exclude=[])
    assert (stats.files_changed, stats.insertions) == (2, 1 + 7)  # the attributes file and the web client


def test_changes_by_kind_breaking_first_with_their_counts(tmp_path: Path) -> None:
    """Layout 5 groups a report's commits by kind, breaking changes first, and counts them in the statistics;
    a report pinned before has no such section."""
    repo = make_repo(tmp_path)
    fix = repo.commit("fix(cart): totals round half up", at=at(9), files={"shop/cart.py": lines_of(2)})
    feat = repo.commit("feat(cart): discounts", at=at(10), files={"shop/discount.py": lines_of(5)})
    gone = repo.commit("refactor!: drop the v1 cart API", at=at(11), files={"shop/v1.py": ""})
    docs = repo.commit("Document the discounts", at=at(12), files={"docs/discounts.md": lines_of(3)})
    text, stats = report(repo, exclude=[], layout=5)
    assert stats.kinds == {"breaking": 1, "features": 1, "fixes": 1, "docs": 1}
    kinds = section(text, "Changes by kind")
    order = [kinds.index(h) for h in ("### Breaking changes (1)", "### Features (1)", "### Fixes (1)", "### Docs (1)")]
    assert order == sorted(order)
    for sha, heading in ((gone, "Breaking changes"), (feat, "Features"), (fix, "Fixes"), (docs, "Docs")):
        assert sha[:8] in kinds.split(f"### {heading}")[1].split("###")[0]
    assert "| Kind | Commits |" in text and "| Breaking changes | 1 |" in text
    before, old_stats = report(repo, exclude=[], layout=4)
    assert "## Changes by kind" not in before and old_stats.kinds == {}
