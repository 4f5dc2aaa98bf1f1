"""Text rules 3: commit text reads as written, in the file and once rendered. A renderer
(markdown-it, CommonMark with tables) shows exactly the author's characters, makes no link but a
``#N`` into the project's forge, and the file holds no backslash where none was needed."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from engine.core import redact
from steps import untrusted
from steps.forge_links import ForgeLinks
from tests.unit.test_untrusted_text import gfm_autolinks

FORGE = ForgeLinks("https://github.com/psf/requests")
RENDERER = MarkdownIt("commonmark", {"html": True}).enable("table")


def rendered(markdown_text: str) -> tuple[str, list[str]]:
    """The visible text of ``markdown_text`` (code spans with their backticks dropped) and every
    live link, image or raw HTML a renderer makes of it."""
    visible: list[str] = []
    live: list[str] = []

    def walk(tokens: list[Token]) -> None:
        for token in tokens:
            if token.type in ("text", "code_inline"):
                visible.append(token.content)
            elif token.type in ("link_open", "image"):
                live.append(str(token.attrGet("href") or token.attrGet("src")))
            elif token.type in ("html_inline", "html_block"):
                live.append("html: " + token.content)
            walk(token.children or [])
    walk(RENDERER.parse(markdown_text))
    return "".join(visible), live


def squeezed(text: str) -> str:
    return re.sub(r"[`\s]", "", text)


@pytest.mark.parametrize(("subject", "written"), [
    ("Fix `_encode_files` detection (#7497)",
     "Fix `_encode_files` detection ([#7497](https://github.com/psf/requests/issues/7497))"),
    ("Add __getattr__ to the module", "Add `__getattr__` to the module"),
    ("Merge dependabot[bot]'s bump of urllib3 (2.0 -> 2.1)", "Merge dependabot[bot]'s bump of urllib3 (2.0 -> 2.1)"),
    ("Ignore *.lock files", "Ignore `*.lock` files"),
    ("snake_case stays, 3 < 4 & 5 > 2", "snake_case stays, 3 < 4 & 5 > 2"),
])
def test_a_subject_is_written_with_no_escape_a_renderer_would_not_need(subject: str, written: str) -> None:
    assert untrusted.text(subject, 3, FORGE) == written
    assert "\\" not in written


def test_a_reference_is_plain_text_when_the_forge_is_unknown() -> None:
    assert untrusted.text("Fix (#12)", 3, ForgeLinks("https://git.internal.example/a/b")) == "Fix (#12)"
    assert untrusted.text("Fix (#12)", 3) == "Fix (#12)"


def test_runs_pinned_to_rules_2_render_as_they_did() -> None:
    assert untrusted.text("Fix `x` (#1)", 2) == "Fix \\`x\\` \\(#1\\)"


ALPHABET = st.sampled_from(list("ab_*~`[]()<>!#&;:/@.|\\-+= ") + ["https://", "www.", "&#x202E;", "#12", "<a", "\u202e"])


@settings(max_examples=400, deadline=None)
@example("a_www.a", 3)  # GFM links a www. name after "_" as after a space
@example("Fix _Budget); (__init__) *.lock.", 4)  # rules 4 leave the punctuation out of the code span
@given(st.lists(ALPHABET, max_size=30).map("".join), st.sampled_from([3, 4]))
def test_any_subject_renders_as_written_and_inert(subject: str, rules: int) -> None:
    written = untrusted.text(subject, rules, FORGE)
    expected = squeezed(" ".join(redact.neutralise(subject).split()))
    for document in (f"- `abc12345` {written} (Alice, 09:00)\n",
                     f"| Author | Commits |\n| --- | --- |\n| {written} | 1 |\n"):
        visible, live = rendered(document)
        assert all(url.startswith("https://github.com/psf/requests/issues/") for url in live), (written, live)
        assert gfm_autolinks(document) == [], written
        assert expected in squeezed(visible), (written, visible)
