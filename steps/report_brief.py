"""A report's short form, as a delivery sends it to a chat or a mailbox: a title and a few lines, within a size.

The short form is read from the report itself, so it says what the report says in the report's language:
its title (the ``#`` line), its first facts (the ``- **…**`` lines above the first section: what it
covers, its activity; the "written by" line only when a fallback wrote it), the first paragraph of its
first section (the summary), the counts of changes by kind, the pull requests when they are known,
and a link to the Notion page or the file. An update (the report was written again) says so in its title.

``fit`` keeps a message within a target's limits (Apprise's ``title_maxlen`` and ``body_maxlen``):
it drops pull requests first, then shortens the summary, then the rest, and keeps the link last.
Pure: text in, text out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from steps.report_texts import Texts, texts

#: The longest summary a short form quotes (characters); a chat message is not the report.
SUMMARY_CHARS = 600
#: The most pull requests a short form lists.
PULL_REQUESTS = 10
#: A short form's own ceiling, whatever the target allows.
BODY_CHARS = 4000
#: A merge commit's subject that names a pull request: ``Merge pull request #12 from …`` (GitHub, Gitea).
PULL = re.compile(r"(?<![\w/&#!\]])#(?P<number>[1-9][0-9]{0,8})\b")
#: GitLab's: ``See merge request group/project!12`` (its page is not ``#12``'s: listed without a link).
MERGE_REQUEST = re.compile(r"merge request [\w./-]*!(?P<number>[1-9][0-9]{0,8})\b", re.IGNORECASE)


@dataclass(frozen=True)
class PullRequest:
    """A merged pull request as a short form lists it."""

    number: int
    title: str
    url: str | None = None


@dataclass(frozen=True)
class Brief:
    """A report's short form before it is fitted to a target."""

    title: str
    facts: tuple[str, ...]
    summary: str
    kinds: str
    pull_requests: tuple[PullRequest, ...]
    link: str
    words: Texts


@dataclass(frozen=True)
class Message:
    """What is sent: a title (empty when the target has none: it leads the body) and a body."""

    title: str
    body: str


def digest(text: str) -> str:
    """What a report says, as the ledger compares it: a re-run that writes the same text sends nothing."""
    return hashlib.sha256(text.encode()).hexdigest()


def pull_requests_of(merges: Sequence[Any] | None, link: Any | None = None) -> list[PullRequest]:
    """The pull requests named by merge commits' subjects (``Merge pull request #12 from …``), each once;
    ``link(number)`` gives a page when the forge is known."""
    found: dict[int, PullRequest] = {}
    for merge in merges or ():
        subject = str(getattr(merge, "subject", ""))
        if (match := PULL.search(subject)) is not None:
            number = int(match["number"])
            found.setdefault(number, PullRequest(number, subject, link(number) if link else None))
        elif (match := MERGE_REQUEST.search(subject)) is not None:
            number = int(match["number"])
            found.setdefault(number, PullRequest(number, subject))
    return list(found.values())


def compose(markdown: str, *, language: str, stats: Mapping[str, Any] | None, link: str, page: bool,
            update: bool = False, fallback: bool = False,
            pull_requests: Sequence[PullRequest] = ()) -> Brief:
    """The short form of the report ``markdown`` (``page``: ``link`` is its Notion page, else its file)."""
    words = texts(language)
    lines = markdown.splitlines()
    title = next((line[2:].strip() for line in lines if line.startswith("# ")), "")
    first_section = next((n for n, line in enumerate(lines) if line.startswith("## ")), len(lines))
    written_by = words.written_by_line("").strip()
    facts = tuple(line[2:].strip() for line in lines[:first_section] if line.startswith("- **")
                  and (fallback or not line.strip().startswith(written_by)))
    summary = _first_paragraph(lines[first_section + 1:])
    kinds = " · ".join(f"{words.kind_titles[kind]} {n}" for kind, n in ((stats or {}).get("kinds") or {}).items()
                       if kind in words.kind_titles and n)
    label = words.brief_page if page else words.brief_file
    return Brief(title=f"{words.brief_updated}: {title}" if update else title, facts=facts,
                 summary=_clip(summary, SUMMARY_CHARS), kinds=kinds,
                 pull_requests=tuple(pull_requests), link=f"{label}: {link}", words=words)


def _first_paragraph(lines: Sequence[str]) -> str:
    """The first paragraph of text (not a table, a list or a quote), joined into one line."""
    found: list[str] = []
    for line in lines:
        text = line.strip()
        if not text:
            if found:
                break
            continue
        if text.startswith(("|", "#", ">", "- ", "* ", "```")):
            if found:
                break
            continue
        found.append(text)
    return " ".join(found)


def _clip(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut at a word with "…" when it is longer."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[:limit]
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def _body(brief: Brief, *, title: str | None, summary: str, requests: int, kinds: bool) -> str:
    parts: list[str] = []
    if title:
        parts.append(title)
    parts.append("\n".join(f"• {fact}" for fact in brief.facts))
    if kinds and brief.kinds:
        parts.append(brief.kinds)
    if summary:
        parts.append(summary)
    if requests and brief.pull_requests:
        shown = brief.pull_requests[:requests]
        listed = [f"• #{p.number} {p.title}" + (f" ({p.url})" if p.url else "") for p in shown]
        if len(brief.pull_requests) > len(shown):
            listed.append(brief.words.brief_more(len(brief.pull_requests) - len(shown)))
        parts.append(f"{brief.words.brief_pull_requests}:\n" + "\n".join(listed))
    parts.append(brief.link)
    return "\n\n".join(p for p in parts if p)


def fit(brief: Brief, *, title_chars: int, body_chars: int) -> Message:
    """The message within a target's limits: ``title_chars`` 0 means the target has no title (it leads the
    body); ``body_chars`` 0 means no limit of its own (``BODY_CHARS`` still holds)."""
    limit = min(body_chars, BODY_CHARS) if body_chars > 0 else BODY_CHARS
    title = _clip(brief.title, title_chars) if title_chars > 0 else ""
    lead = None if title_chars > 0 else brief.title
    requests = min(len(brief.pull_requests), PULL_REQUESTS)
    summary = brief.summary
    while True:
        body = _body(brief, title=lead, summary=summary, requests=requests, kinds=True)
        if len(body) <= limit:
            return Message(title, body)
        if requests:
            requests -= 1
            continue
        over = len(body) - limit
        if summary and over < len(summary):
            summary = _clip(summary, len(summary) - over)
            continue
        break
    # Even the facts do not fit: keep the link whole at the end, and as much of the rest as there is room for.
    rest = _body(brief, title=lead, summary="", requests=0, kinds=False).removesuffix(brief.link).rstrip()
    room = limit - len(brief.link) - 2
    if room <= 0:
        return Message(title, _clip(brief.link, limit))
    return Message(title, f"{_clip(rest, room)}\n\n{brief.link}")
