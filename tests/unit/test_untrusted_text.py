"""Commit text an author controls, on its way into the report (``steps.untrusted``, text rules 1):
no terminal escapes, no live links or images from a subject or a name, no way out of a code
span, no malformed or credentialed URL as a Notion link. A run pinned before the rules
(``text_rules`` absent, 0) renders byte for byte as it did."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from engine.web import markdown
from steps import notion_blocks
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
