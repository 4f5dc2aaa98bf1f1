"""Layout 2 of the built-in writer: a report a developer reads. Areas below source roots, a commit
filed under its source change, bots apart, no "most active" on a tie, one name for the root,
commits and ``#N`` linked to the forge, and text without stray backslashes; runs pinned before
keep layout 1."""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt

from steps.generate_report import BuiltinWriter, ReportInput, generate
from steps.git_log import CommitInfo
from tests.unit.test_generate_report import commit, report_input
from workflows import report_settings

ALICE = ("Alice Kim", "alice@example.com")
BOB = ("Bob Lee", "bob@example.com")
BOT = ("dependabot[bot]", "49699333+dependabot[bot]@users.noreply.github.com")
FORGE = "https://github.com/psf/requests"


def write(commits: list[CommitInfo], **overrides: Any) -> str:
    fields: dict[str, Any] = {"layout": report_settings.LAYOUT, "text_rules": report_settings.TEXT_RULES, "forge": FORGE, "prompt_version": "v4"}
    inp: ReportInput = report_input(commits, **{**fields, **overrides})
    return generate(inp, BuiltinWriter(), num_ctx=8192, options={}).text


def section(text: str, heading: str) -> str:
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def src_layout() -> list[CommitInfo]:
    return [
        commit(1, author=ALICE, subject="Fix `_encode_files` detection (#7497)",
               files={"src/requests/models.py": (3, 1), "tests/test_requests.py": (40, 0)}),
        commit(2, author=BOB, subject="Add __getattr__ to the json package",
               files={"src/requests/compat/json.py": (12, 2)}),
        commit(3, author=BOT, subject="Bump urllib3 from 2.0 to 2.1",
               files={"requirements.txt": (1, 1)}),
        commit(4, author=BOT, subject="Bump idna from 3.6 to 3.7", files={"requirements.txt": (1, 1)}),
    ]


def test_areas_are_below_the_source_root_and_a_fix_is_filed_under_its_source() -> None:
    text = write(src_layout())
    areas = section(text, "Changes by area")
    assert "### src/requests\n" in areas and "### src/requests/compat\n" in areas and "### src\n" not in areas
    fix = areas.split("### src/requests\n")[1].split("###")[0]
    assert "Fix `_encode_files` detection" in fix  # its test is larger, its area is still the source
    assert "### tests" not in areas


def test_bots_are_apart_and_a_tie_names_no_most_active_author() -> None:
    text = write(src_layout())
    summary = section(text, "Summary")
    assert "most active" not in summary  # Alice and Bob made one commit each
    assert "Most of the work was in src/requests and src/requests/compat (1 and 1 commits mainly there)." in summary
    assert "Bots made 2 commits (dependabot[bot]), not counted as authors." in summary
    assert "2 authors" in summary or "2 authors" in text.split("## Summary")[0]
    stats = section(text, "Statistics")
    authors = stats.split("### Authors\n")[1].split("###")[0]
    assert "dependabot" not in authors
    assert "| dependabot[bot] | 2 |" in stats.split("### Bots\n")[1]


def test_a_projects_own_bots_are_apart_too_and_the_leader_is_named_when_there_is_one() -> None:
    commits = [commit(1, author=ALICE), commit(2, author=ALICE), commit(3, author=("Release Bot", "ci@example.com"))]
    summary = section(write(commits, bots=["ci@example.com"]), "Summary")
    assert "The most active author was Alice Kim with 2 commits." in summary
    assert "Bots made 1 commit (Release Bot)" in summary


def test_commits_and_references_link_to_the_forge_and_render_as_written() -> None:
    text = write(src_layout())
    first = src_layout()[0]
    assert f"[`{first.sha[:8]}`]({FORGE}/commit/{first.sha})" in text
    assert f"([#7497]({FORGE}/issues/7497))" in text
    assert "\\" not in section(text, "Changes by area") and "\\" not in section(text, "Summary")
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert "<code>_encode_files</code>" in html and "<code>__getattr__</code>" in html


def test_the_root_has_one_name_in_the_summary_and_the_sections() -> None:
    text = write([commit(1, files={"README.md": (5, 0)}), commit(2, files={"setup.py": (3, 0)})])
    assert "Top-level files" in section(text, "Summary") and "### Top-level files" in text
    assert "(root)" not in text


def test_an_unknown_forge_gets_no_link() -> None:
    text = write(src_layout(), forge="https://git.internal.example/team/requests")
    assert "](" not in section(text, "Changes by area")


def test_runs_pinned_before_keep_layout_1() -> None:
    text = write(src_layout(), layout=1, text_rules=2)
    areas = section(text, "Changes by area")
    assert "### src\n" in areas and "### tests\n" in areas and "](" not in areas
    assert "most active" in section(text, "Summary")


def test_notion_gets_the_same_links_and_code() -> None:
    from steps import notion_blocks

    text = write(src_layout())
    first = src_layout()[0]
    items = [i for b in notion_blocks.markdown_to_blocks(text) for i in b[b["type"]].get("rich_text", [])]
    sha = [i for i in items if i["text"]["content"] == first.sha[:8]]
    assert sha and sha[0]["text"]["link"] == {"url": f"{FORGE}/commit/{first.sha}"} and sha[0]["annotations"]["code"]
    assert any(i["text"]["content"] == "#7497" and i["text"]["link"] == {"url": f"{FORGE}/issues/7497"} for i in items)
    assert not any("\\" in i["text"]["content"] for i in items)


def test_a_quiet_day_with_on_empty_report_is_one_line_under_what_it_covers() -> None:
    text = write([], on_empty="report")
    assert text.splitlines() == [
        "# Daily report: platform, 2026-09-29", "",
        "- **Period:** 2026-09-29 00:00 → 2026-09-30 00:00 (Asia/Seoul); "
        "UTC 2026-09-28T15:00:00Z → 2026-09-29T15:00:00Z", "",
        "No commits were authored in platform during this day."]


def test_a_weekly_pinned_with_layout_2_has_no_week_section_and_layout_3_has_one() -> None:
    weekly = {"workflow": "weekly_report", "business_key": "2026-W40", "window_start": "2026-09-27T15:00:00Z",
              "window_end": "2026-10-04T15:00:00Z"}
    assert "## This week" not in write(src_layout(), layout=2, **weekly)
    assert "## This week" not in write(src_layout(), layout=3)  # a daily has no week
    text = write(src_layout(), layout=3, **weekly)
    assert "- **Day by day** (commits by author date): Mon 0 · Tue 4 · Wed 0" in text
    assert "### Merged this week" not in text  # no merges gathered: none claimed


def test_the_samples_are_what_the_script_writes_from_the_pinned_commit() -> None:
    """docs/samples holds a daily, a weekly, a monthly, a sprint, a sub-project's and a team report in English and
    Korean, and the README quotes them."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    for stem in ("daily", "weekly", "monthly", "sprint", "subproject", "team"):
        for language in ("en", "ko"):
            text = (root / "docs" / "samples" / f"{stem}.{language}.md").read_text(encoding="utf-8")
            assert text.startswith("# ") and not text.startswith("---")
        assert f"docs/samples/{stem}.en.md" in readme
    assert "## This week" in (root / "docs/samples/weekly.en.md").read_text(encoding="utf-8")
    assert "## 사람별" in (root / "docs/samples/team.ko.md").read_text(encoding="utf-8")
    assert "## In progress" in (root / "docs/samples/daily.en.md").read_text(encoding="utf-8")
    assert "## Week by week" in (root / "docs/samples/sprint.en.md").read_text(encoding="utf-8")


def test_a_known_automation_account_is_a_bot_without_being_named() -> None:
    """Issue 43, item 7: ``github-actions`` (no ``[bot]``) was "the most active author"."""
    actions = ("github-actions", "41898282+github-actions[bot]@users.noreply.github.com".replace("[bot]", ""))
    commits = [commit(1, author=ALICE), *(commit(n, author=actions) for n in range(2, 6))]
    summary = section(write(commits), "Summary")
    assert "most active author was Alice Kim" in summary and "Bots made 4 commits (github-actions)" in summary
    assert "github-actions" in section(write(commits, layout=3), "Summary")  # runs pinned before keep layout 3
    assert "Bots made" not in section(write(commits, layout=3), "Summary")
