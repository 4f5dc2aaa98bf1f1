"""Untrusted Markdown (reports, commit text) to HTML with raw HTML disabled.

markdown-it-py with ``html=False`` turns ``<script>`` and ``<img onerror=…>`` in
the source into escaped text, and its link validator refuses ``javascript:`` and
``data:`` URLs. The result is the only HTML the templates mark safe.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from markupsafe import Markup

MAX_FILE_BYTES = 2_000_000
_RENDERER = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def to_html(source: str) -> Markup:
    """Untrusted Markdown as HTML: raw HTML escaped, unsafe link targets refused, front matter dropped."""
    return Markup(_RENDERER.render(without_front_matter(source)))


def without_front_matter(source: str) -> str:
    """The report body: the YAML front matter repeats the pinned inputs the page already shows."""
    if not source.startswith("---\n"):
        return source
    end = source.find("\n---\n", 4)
    return source if end < 0 else source[end + 5:]


@dataclass(frozen=True)
class LocalReport:
    """The saved report file as the run page may show it: its text, or why not (``problem``)."""

    text: str | None
    problem: str | None = None


def read_local_report(location: str, root: Path | None, sha256: str | None) -> LocalReport:
    """The Markdown file behind an artifact location ``host:path``, only if it is still what the run saved.

    Shown only when the path is on this host, a regular file (not a symlink) inside ``root``
    (the workflow's reports directory) once every link is resolved, and its sha256 equals the
    artifact's; otherwise ``problem`` says it changed or vanished and nothing of it is read out.
    """
    host, sep, path_text = location.partition(":")
    if not sep or host != socket.gethostname():
        return LocalReport(None)
    path = Path(path_text)
    if path.suffix != ".md" or not path.is_absolute() or root is None or sha256 is None:
        return LocalReport(None, "the saved file cannot be checked against the run (no reports directory or digest)")
    try:
        inside = path.resolve(strict=True).is_relative_to(root.resolve())
        before = os.lstat(path)
        if not inside or not stat.S_ISREG(before.st_mode) or before.st_size > MAX_FILE_BYTES:
            return LocalReport(None, "the saved file changed since the run (it is not the regular file the run wrote)")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError:
        return LocalReport(None, "the saved file vanished since the run")
    if hashlib.sha256(data).hexdigest() != sha256:
        return LocalReport(None, "the saved file changed since the run (its sha256 differs)")
    try:
        return LocalReport(data.decode("utf-8"))
    except UnicodeDecodeError:
        return LocalReport(None, "the saved file changed since the run (it is not UTF-8)")
