"""Untrusted Markdown (reports, commit text) to HTML with raw HTML disabled.

markdown-it-py with ``html=False`` turns ``<script>`` and ``<img onerror=…>`` in
the source into escaped text, and its link validator refuses ``javascript:`` and
``data:`` URLs. The result is the only HTML the templates mark safe.
"""

from __future__ import annotations

import socket
from pathlib import Path

from markdown_it import MarkdownIt
from markupsafe import Markup

MAX_FILE_BYTES = 2_000_000
_RENDERER = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def to_html(source: str) -> Markup:
    """A report's Markdown (front matter dropped) as safe HTML."""
    return Markup(_RENDERER.render(without_front_matter(source)))


def without_front_matter(source: str) -> str:
    """The report body: the YAML front matter repeats the pinned inputs the page already shows."""
    if not source.startswith("---\n"):
        return source
    end = source.find("\n---\n", 4)
    return source if end < 0 else source[end + 5:]


def read_local_report(location: str) -> str | None:
    """The Markdown file behind an artifact location ``host:path`` when it is on this host, else None."""
    host, sep, path_text = location.partition(":")
    if not sep or host != socket.gethostname():
        return None
    path = Path(path_text)
    if path.suffix != ".md":
        return None
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
