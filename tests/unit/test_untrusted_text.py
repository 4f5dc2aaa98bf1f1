"""Commit text an author controls, on its way into the report (``steps.untrusted``, text rules 1):
no terminal escapes, no live links or images from a subject or a name, no way out of a code
span, no malformed or credentialed URL as a Notion link. A run pinned before the rules
(``text_rules`` absent, 0) renders byte for byte as it did."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from engine.core import redact
from engine.web import markdown
from steps import notion_blocks, untrusted
from steps.generate_report import BuiltinWriter, ReportInput, compute_stats, generate, render_prompt
from tests.unit.test_generate_report import commit, report_input

ESC, BEL, RLO = "\x1b", "\x07", "\u202e"
SUBJECT = f"{ESC}[31mred{BEL} [click me](https://evil.example/) ![pixel](https://evil.example/p.png) {RLO}gnp.exe"
AUTHOR = "Mallory [admin](https://evil.example/a)"
# sha256 of the report text and the prompt made by the code before the rules existed (same input).
BEFORE_TEXT = "22e1103cacfc9f55"
BEFORE_PROMPT = "e3d2a0adc15f2826"


def hostile_input(**overrides: Any) -> ReportInput:
    evil = commit(1, subject=SUBJECT, author=(AUTHOR, "m@example.com"), body=f"line{ESC}]0;title{BEL}\nmore",
                  files={"src/a`b.py": (3, 1), "`tick`.md": (1, 0), "docs/[x](https://evil.example).md": (2, 0)})
    return report_input([evil, commit(2)], **overrides)


def report(rules: int) -> str:
    return generate(hostile_input(text_rules=rules), BuiltinWriter(), num_ctx=8192, options={}).text


def prompt(rules: int) -> str:
    inp = hostile_input(text_rules=rules)
    return render_prompt(inp, compute_stats(inp.commits), budget_chars=100_000)[0]


def test_no_control_character_reaches_the_report_or_the_prompt() -> None:
    for text in (report(1), prompt(1)):
        assert ESC not in text and BEL not in text and RLO not in text
        assert all(c.isprintable() or c == "\n" for c in text)


def test_a_subject_or_a_name_makes_no_live_link_or_image_in_the_page() -> None:
    html = str(markdown.to_html(report(1)))
    assert "<a " not in html and "<img" not in html
    assert "[click me](https://evil.example/)" in html and "Mallory [admin]" in html  # shown as text


def test_a_backtick_in_a_file_name_stays_inside_its_code_span() -> None:
    html = str(markdown.to_html(report(1)))
    assert "<code>src/a`b.py</code>" in html and "<code>`tick`.md</code>" in html


def rich_texts(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for block in notion_blocks.markdown_to_blocks(text):
        body = block[block["type"]]
        found += [item for cell in body.get("cells", [body.get("rich_text", [])]) for item in cell] \
            if "cells" in body else body.get("rich_text", [])
    return found


def test_notion_gets_the_same_text_with_no_link_and_the_file_names_as_code() -> None:
    items = rich_texts(report(1))
    assert all(item["text"]["link"] is None for item in items)
    plain = "".join(item["text"]["content"] for item in items)
    assert "[click me](https://evil.example/)" in plain and "\\[" not in plain
    assert any(item["text"]["content"] == "`tick`.md" and item.get("annotations", {}).get("code")
               for item in items)


@pytest.mark.parametrize("url", ["https://user:pw@example.com/", "http://", "https://exa mple.com",
                                 "https://example.com:99999/", "javascript:alert(1)", "https://ex\u00e4mple.com/"])
def test_only_plain_http_urls_become_notion_links(url: str) -> None:
    items = notion_blocks.inline_rich_text(f"see [this]({url}) now")
    assert all(item["text"]["link"] is None for item in items)
    ok = notion_blocks.inline_rich_text("see [this](https://example.com/a?b=1) now")
    assert [item["text"]["link"] for item in ok if item["text"]["link"]] == [{"url": "https://example.com/a?b=1"}]


def test_a_run_pinned_before_the_rules_renders_as_it_did() -> None:
    assert hashlib.sha256(report(0).encode()).hexdigest()[:16] == BEFORE_TEXT
    assert hashlib.sha256(prompt(0).encode()).hexdigest()[:16] == BEFORE_PROMPT
    assert report(0) != report(1)


# -- issue 36: one rule for every source (text rules 2) ------------------------------------------------

# sha256 of the report text and the prompt of ``hostile_input`` under rules 1, by the code before rules 2.
RULES_1_TEXT = "b63bd71c2287556f"
RULES_1_PROMPT = "45eac9042f4b9b75"
FORGE = "https://git.example.com/team/platform"
PROBE = ("Summary of the day. [Click to re-authenticate](https://evil.example/phish) "
         "![t](https://evil.example/track.png) \x1b]0;PWNED-TITLE\x07 \u202eevil")
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_a_run_pinned_to_rules_1_renders_as_it_did() -> None:
    assert hashlib.sha256(report(1).encode()).hexdigest()[:16] == RULES_1_TEXT
    assert hashlib.sha256(prompt(1).encode()).hexdigest()[:16] == RULES_1_PROMPT
    assert report(1) != report(2) and prompt(2) == prompt(1)  # the prompt needs no Markdown escaping


def links_of(markdown_text: str, **options: Any) -> list[str]:
    """Every live link and image target markdown-it makes of ``markdown_text`` (CommonMark)."""
    renderer = MarkdownIt("commonmark", {"html": False, **options})
    found: list[str] = []
    for token in renderer.parse(markdown_text):
        for child in [token, *(token.children or [])]:
            if child.type in ("link_open", "image"):
                found.append(str(child.attrGet("href") or child.attrGet("src")))
            if child.type in ("html_inline", "html_block"):
                found.append(f"raw html: {child.content}")
    return found


# GFM's extended autolinks: http(s)/ftp after a non-letter, www. after a delimiter, an e-mail address.
GFM_AUTOLINK = re.compile(r"(?<![A-Za-z])(?:https?|ftp)://[A-Za-z0-9_-][^\s<]*|(?<![^\s*_~(])www\.[A-Za-z0-9_-][^\s<]*"
                          r"|[\w.+-]+@[\w-]+\.[\w.-]*\w")


def gfm_autolinks(markdown_text: str) -> list[str]:
    """What GFM's autolinker would link in ``markdown_text``: a scheme URL, a www. name or an e-mail
    address inside one run of plain text (its escapes split runs, as cmark-gfm's parser does)."""
    renderer = MarkdownIt("commonmark", {"html": True}).disable("text_join")
    found: list[str] = []
    for token in renderer.parse(markdown_text):
        for child in token.children or []:
            if child.type == "text":
                found += [u.rstrip(".,:;!?*_~)") for u in GFM_AUTOLINK.findall(child.content)]
    return found


def test_the_models_text_is_made_inert_in_the_file_the_page_and_notion() -> None:
    text = untrusted.narrative(f"## Summary\n\n{PROBE}\n", 2)
    assert not CONTROL.search(text)
    assert links_of(text) == [] and links_of(text, html=True) == [] and gfm_autolinks(text) == []
    page = str(markdown.to_html(text))
    assert "<a " not in page and "<img" not in page and "\u202e" not in page
    assert "[Click to re-authenticate](https://evil.example/phish)" in page  # shown as written
    items = rich_texts(text)
    assert all(item["text"]["link"] is None for item in items)
    assert "[Click to re-authenticate](https://evil.example/phish)" in "".join(i["text"]["content"] for i in items)


@pytest.mark.parametrize("written", [
    "<https://evil.example/a>", "<a href=\"https://evil.example/b\">here</a>", "<img src=https://evil.example/c.png>",
    "see https://evil.example/d.", "www.evil.example/e", "mail mallory@evil.example", "[r][1]\n\n[1]: https://evil.example/f",
    "[x](<https://evil.example/g>)", "[x](https://evil.example/h \"title\")", "`a` [x](https://evil.example/i) `b`",
    "``[x](https://evil.example/j)`", "`<https://evil.example/k>`", "| `a | [x](https://evil.example/l) | b` |\n| - | - | - |",
    "- item\n  ```\n  code\n[x](https://evil.example/m)", "[[x](https://evil.example/n)](https://git.example.com/team/platform)",
    "[x](https://git.example.com/team/platform-evil/o)", "[x](https://git.example.com/team/platform@evil.example/p)",
    # Security round 3: paths that only start like the forge's and resolve elsewhere on its host.
    "[re-authorize](https://git.example.com/team/platform/../../login/oauth/authorize?client_id=x&scope=repo)",
    "![t](https://git.example.com/team/platform/%2e%2e/%2e%2e/login)", "<https://git.example.com/team/platform/../../x>",
    "see https://git.example.com/team/platform/..%2F..%2Flogin now",
])
def test_no_way_of_writing_a_link_leaves_it_live(written: str) -> None:
    text = untrusted.narrative(written, 2, FORGE)
    assert links_of(text) == [] and links_of(text, html=True) == [], text
    assert [u for u in gfm_autolinks(text) if not redact.link_allowed(u, FORGE)] == [], text
    assert untrusted.foreign_links(written, FORGE), written  # and the grounding check sees it


def test_a_link_into_the_projects_own_forge_stays() -> None:
    written = f"See [the fix]({FORGE}/commit/abc123) and {FORGE}/pull/7."
    text = untrusted.narrative(written, 2, FORGE)
    assert links_of(text) == [f"{FORGE}/commit/abc123"]
    assert untrusted.foreign_links(written, FORGE) == []
    assert untrusted.foreign_links(written, None) == [f"{FORGE}/commit/abc123", f"{FORGE}/pull/7"]
    assert links_of(untrusted.narrative(written, 2, None)) == []  # no forge known: none stays


def test_code_blocks_and_spans_keep_their_text() -> None:
    written = "## Notes\n\n```\nlist[0] = <a href=x>\n```\n\nUse `items[0]`, [or not].\n\n    indented[1]\n"
    text = untrusted.narrative(written, 2)
    assert text == written.replace("[or not]", "\\[or not\\]")


def test_a_character_reference_that_decodes_to_a_bidi_override_is_shown_as_written() -> None:
    """Item 11: ``&#x202E;`` in a subject became a real override in the rendered report."""
    subject = "fix &#x202E;gnp.exe &lrm; &amp; &#91;x&#93;"
    before = str(markdown.to_html(untrusted.text(subject, 1)))
    after = str(markdown.to_html(untrusted.text(subject, 2)))
    assert "\u202e" in before  # the defect, still there for runs pinned to rules 1 (the page removes it)
    assert "\u202e" not in after and "\u200e" not in after and "&amp;#x202E;" in after
    assert "\u202e" not in untrusted.narrative(f"x {subject}", 2)


@pytest.mark.parametrize(("remote", "forge"), [
    ("git@github.com:org/repo.git", "https://github.com/org/repo"),
    ("https://user:pw@GitLab.example.com/group/sub/repo.git", "https://gitlab.example.com/group/sub/repo"),
    ("ssh://git@git.example.com:2222/team/platform.git/", "https://git.example.com/team/platform"),
    ("/srv/git/platform.git", None), ("file:///srv/git/platform", None), ("../platform", None),
    ("https://localhost/x", None), ("ftp://git.example.com/x", None), ("git@host.example:'; rm -rf", None),
])
def test_the_forge_is_the_origin_remotes_web_address(remote: str, forge: str | None) -> None:
    assert untrusted.forge_of(remote) == forge


# Hypothesis: random Unicode, Markdown and HTML, pieced together.
WORD = st.from_regex(r"\A[a-z]{3,8}\Z")
TARGET = st.sampled_from(["https://evil.example/x", "http://evil.example", "javascript:alert(1)", "/relative",
                          f"{FORGE}/commit/abc", f"{FORGE}-evil/y", "https://evil.example/a_b?c=1&d=2"])
PIECE = st.one_of(
    WORD, WORD.map(lambda w: f" {w} "), st.text(max_size=12),
    st.sampled_from(["\n", "\n\n", "- ", "## ", "> ", "```\n", "`", "``", "\\", "|", "*", "_", "!", "[", "]", "(", ")",
                     "<", ">", "&", "&#x202E;", "&#8238;", "&lrm;", "&amp;", "&#91;", "\x1b]0;t\x07", "\x1b[31m",
                     "\u202e", "\u2066", "\u200f", "\x9b", "www.", "@", "://", "mallory@evil.example"]),
    st.tuples(WORD, TARGET).map(lambda p: f"[{p[0]}]({p[1]})"),
    st.tuples(WORD, TARGET).map(lambda p: f"![{p[0]}]({p[1]})"),
    TARGET.map(lambda t: f"<{t}>"), TARGET.map(lambda t: f"<a href=\"{t}\">x</a>"), TARGET.map(lambda t: f"<img src={t}>"),
    TARGET, TARGET.map(lambda t: f"[r]: {t}\n"),
)
MARKDOWNISH = st.lists(PIECE, max_size=40).map("".join)


@settings(deadline=None, max_examples=300)
@given(MARKDOWNISH, st.sampled_from([FORGE, None]))
def test_the_models_text_never_holds_a_control_character_or_a_foreign_live_link(
        written: str, forge: str | None) -> None:
    text = untrusted.narrative(written, 2, forge)
    assert not CONTROL.search(text)
    live = links_of(text) + links_of(text, html=True) + gfm_autolinks(text)
    assert all(redact.link_allowed(t, forge) for t in live), (written, text, live)
    page = str(markdown.to_html(text))
    assert not CONTROL.search(page)
    assert untrusted.narrative(text, 2, forge) == text  # once is enough
    if live:
        assert untrusted.foreign_links(written, None)  # the grounding check sees what a forge may keep


@settings(deadline=None, max_examples=200)
@given(st.lists(WORD, min_size=1, max_size=8), MARKDOWNISH)
def test_plain_words_survive(words: list[str], noise: str) -> None:
    written = " ".join(words) + " " + noise
    text = untrusted.narrative(written, 2, FORGE)
    assert all(word in text for word in words)
    assert all(word in untrusted.text(written, 2) for word in words)


@settings(deadline=None, max_examples=300)
@given(MARKDOWNISH)
def test_commit_text_never_holds_a_control_character_or_a_live_link(written: str) -> None:
    for text in (untrusted.text(written, 2), untrusted.code(written, 2)):
        assert not CONTROL.search(text)
        assert links_of(text) == [] and links_of(text, html=True) == [] and gfm_autolinks(text) == [], (written, text)
        assert not CONTROL.search(str(markdown.to_html(text)))
