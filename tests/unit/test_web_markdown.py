"""The run page renders a report's body as HTML: raw HTML stays text, front matter is left out."""

from __future__ import annotations

from engine.web.markdown import to_html


def test_front_matter_is_not_rendered_as_a_heading() -> None:
    html = to_html("---\nrun_id: 4\nkey: daily_report:demo:2026-11-29\n---\n# Daily report\n")
    assert html.strip() == "<h1>Daily report</h1>"


def test_raw_html_in_a_report_is_shown_as_text() -> None:
    html = to_html("- <img src=x onerror=alert(1)> and <script>alert(2)</script>\n")
    assert "<img" not in html and "<script" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_a_report_without_front_matter_is_rendered_whole() -> None:
    assert "<hr />" in to_html("text\n\n---\n\nmore\n")
