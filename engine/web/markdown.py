"""Untrusted Markdown (reports, commit text) to HTML with raw HTML disabled.

markdown-it-py with ``html=False`` turns ``<script>`` and ``<img onerror=…>`` in
the source into escaped text, and its link validator refuses ``javascript:`` and
``data:`` URLs. A link or image that does not point into the run's forge
(``redact.link_allowed``) is shown as the text it was written as, so a report
saved before the model's text was made inert (text rules 2) shows no live link
either. The result is the only HTML the templates mark safe; the templates then
remove control and bidi characters from it like from every value they print.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from engine.core import redact

MAX_FILE_BYTES = 2_000_000
_RENDERER = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def to_html(source: str, forge: str | None = None) -> Markup:
    """Untrusted Markdown as HTML: raw HTML escaped, unsafe link targets refused, links and images
    out of ``forge`` (None: all of them) shown as text, front matter dropped."""
    tokens = _RENDERER.parse(without_front_matter(source))
    for token in tokens:
        if token.children:
            token.children = _inert_links(token.children, forge)
    return Markup(_RENDERER.renderer.render(tokens, _RENDERER.options, {}))


def _inert_links(children: list[Token], forge: str | None) -> list[Token]:
    """``children`` with every link and image out of ``forge`` replaced by its source text."""
    out: list[Token] = []
    closing: list[str | None] = []  # per open link: the text that replaces its close, None when it stays live
    for token in children:
        if token.type == "link_open":
            href = str(token.attrGet("href") or "")
            if redact.link_allowed(href, forge):
                closing.append(None)
                out.append(token)
                continue
            auto = token.markup in ("autolink", "linkify")
            closing.append(">" if auto else f"]({href})")
            out.append(_text("<" if auto else "["))
        elif token.type == "link_close":
            replacement = closing.pop() if closing else None
            out.append(token if replacement is None else _text(replacement))
        elif token.type == "image" and not redact.link_allowed(str(token.attrGet("src") or ""), forge):
            out.append(_text(f"![{token.content}]({token.attrGet('src') or ''})"))
        else:
            out.append(token)
    return out


def _text(content: str) -> Token:
    return Token("text", "", 0, content=content)


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
        if not inside or not stat.S_ISREG(before.st_mode):
            return LocalReport(None, "the saved file changed since the run (it is not the regular file the run wrote)")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
            digest = hashlib.sha256(data)
            large = len(data) > MAX_FILE_BYTES
            while large and (chunk := handle.read(1 << 20)):  # hashed to tell a large report from a changed one
                digest.update(chunk)
    except OSError:
        return LocalReport(None, "the saved file vanished since the run")
    if digest.hexdigest() != sha256:
        return LocalReport(None, "the saved file changed since the run (its sha256 differs)")
    if large:
        return LocalReport(None, f"the saved file is as the run wrote it, but {before.st_size:,} bytes: the page shows "
                                 f"reports up to {MAX_FILE_BYTES:,} bytes; open {path} instead")
    try:
        return LocalReport(data.decode("utf-8"))
    except UnicodeDecodeError:
        return LocalReport(None, "the saved file changed since the run (it is not UTF-8)")
