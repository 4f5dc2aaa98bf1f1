"""Reports inert under every Markdown renderer people use (security round 3, item 5).

The saved report is read by more than the page's CommonMark: MkDocs and many wikis render with
Python-Markdown, GitHub and GitLab with cmark-gfm. Under Python-Markdown a backslash before ``<`` or ``&``
is no escape, so the model's escaped ``\\<script>`` became a live tag and ``\\&#x202E;`` a bidi override;
cmark-gfm links an e-mail address whatever is escaped in it. From text rules 4 every character a renderer
could act on is written so that all three read it as text. Here the model's text and commit text, random,
are rendered by the three, and the HTML is read back: no element but the ones Markdown makes, no link but
into the project's forge, no control or bidi character. (Pandoc and others are not installed here: not
checked.)
"""

from __future__ import annotations

import html.parser

import cmarkgfm
import markdown as python_markdown
from cmarkgfm.cmark import Options
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from engine.core import redact
from steps import untrusted
from steps.forge_links import ForgeLinks
from tests.unit.test_text_as_written import ALPHABET
from tests.unit.test_untrusted_text import CONTROL, FORGE, MARKDOWNISH

RULES = untrusted.ENTITY_RULES
#: What Markdown itself makes of text: any other element came from the text.
MARKDOWN_TAGS = frozenset({"p", "br", "hr", "em", "strong", "del", "code", "pre", "blockquote", "ul", "ol", "li",
                           "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "a",
                           "img", "input"})


def renderings(text: str) -> dict[str, str]:
    """``text`` as HTML by CommonMark (markdown-it, raw HTML on), Python-Markdown as MkDocs sets it up (tables,
    fenced code) and GitHub's cmark-gfm."""
    return {"commonmark": MarkdownIt("commonmark", {"html": True}).enable("table").render(text),
            "python-markdown": python_markdown.markdown(text, extensions=["tables", "fenced_code"]),
            "github": cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)}


class Elements(html.parser.HTMLParser):
    """Every element and every link or image target in a piece of HTML, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.targets: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.targets += [value or "" for name, value in attrs if name in ("href", "src", "action", "formaction")]
        if any(name.startswith("on") for name, _ in attrs):
            self.tags.append(f"{tag}[{[n for n, _ in attrs]}]")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def assert_inert(text: str, forge: str | None) -> None:
    for renderer, rendered in renderings(text).items():
        found = Elements()
        found.feed(rendered)
        found.close()
        stray = [t for t in found.tags if t not in MARKDOWN_TAGS]
        assert stray == [], (renderer, text, rendered)
        live = [t for t in found.targets if not redact.link_allowed(t, forge)]
        assert live == [], (renderer, text, rendered)
        assert not CONTROL.search("".join(found.text)), (renderer, text, rendered)


@settings(max_examples=300, deadline=None)
@example("<script>alert(1)</script> \\<iframe src=//evil.example> \\<svg onload=alert(1)> <form action=//x>")
@example("\\&#x202E;gnp.exe \\&rlm; &#8238; mail mallory@evil.example")
@given(MARKDOWNISH)
def test_the_models_text_is_inert_under_every_renderer(written: str) -> None:
    assert_inert(untrusted.narrative(written, RULES, FORGE), FORGE)


@settings(max_examples=300, deadline=None)
@example("Fix <script>alert(1)</script> for a@b.example &#x202E; (#12) `x`<b>")
@given(st.lists(ALPHABET, max_size=30).map("".join))
def test_commit_text_is_inert_under_every_renderer(subject: str) -> None:
    written = untrusted.text(subject, RULES, ForgeLinks(FORGE))
    assert_inert(f"- `abc12345` {written} (Alice, 09:00)\n\n| Author | Commits |\n| --- | --- |\n| {written} | 1 |\n",
                 FORGE)


def test_rules_3_were_not_and_stay_as_they_were() -> None:
    """The defect, still there for runs pinned to rules 3 (they re-render byte for byte)."""
    text = untrusted.narrative("<script>alert(1)</script>", 3)
    assert text == "\\<script>alert(1)\\</script>" and "<script>" in renderings(text)["python-markdown"]
    assert untrusted.narrative("<script>alert(1)</script>", RULES) == "&lt;script>alert(1)&lt;/script>"
