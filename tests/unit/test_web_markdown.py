"""The run page renders a report's body as HTML: raw HTML stays text, front matter is left out."""

from __future__ import annotations

from pathlib import Path

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


def test_a_saved_report_links_nowhere_but_into_the_runs_forge() -> None:
    """Issue 36: a report saved before the model's text was made inert rendered a live phishing link;
    the page now shows any link or image out of the run's forge as the text it was written as."""
    forge = "https://git.example.com/team/platform"
    source = ("[Click to re-authenticate](https://evil.example/phish) ![t](https://evil.example/track.png) "
              f"<https://evil.example/auto> [the fix]({forge}/commit/abc) [near]({forge}-evil/x)\n")
    html = str(to_html(source, forge))
    assert html.count("<a ") == 1 and f'<a href="{forge}/commit/abc">the fix</a>' in html
    assert "<img" not in html
    assert "[Click to re-authenticate](https://evil.example/phish)" in html
    assert "![t](https://evil.example/track.png)" in html and "&lt;https://evil.example/auto&gt;" in html
    assert f"[near]({forge}-evil/x)" in html
    assert "<a " not in str(to_html(source))  # no forge known: no link at all


def test_a_report_over_the_pages_limit_is_named_large_not_changed(tmp_path: Path) -> None:
    """Security round 3, item 10: a 3 MB report the run wrote was shown as "changed since the run"."""
    import hashlib
    import socket

    from engine.web import markdown

    report = tmp_path / "app" / "2026-09-29-app-daily-summary.md"
    report.parent.mkdir()
    body = ("- a commit line of a very busy day\n" * 90_000).encode()
    report.write_bytes(body)
    location = f"{socket.gethostname()}:{report}"
    large = markdown.read_local_report(location, tmp_path, hashlib.sha256(body).hexdigest())
    assert large.text is None and "as the run wrote it" in (large.problem or "") and "changed" not in (large.problem or "")
    changed = markdown.read_local_report(location, tmp_path, hashlib.sha256(b"other").hexdigest())
    assert changed.text is None and "sha256 differs" in (changed.problem or "")
