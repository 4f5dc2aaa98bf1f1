"""Markdown to Notion blocks, within the Notion API's request limits. Pure functions.

Supported: ATX headings (``#``..``###``; deeper levels become ``heading_3``),
bulleted, numbered and task list items (nesting is flattened), fenced code
blocks with a language, block quotes, thematic breaks (dividers) and
paragraphs. Inline: ``**bold**``, ``*italic*``, ```code```, ``[text](http(s) url)``.
Anything else (tables, HTML) stays as paragraph text: no content is dropped.

Limits (https://developers.notion.com/reference/request-limits): a rich text
``content`` holds at most 2,000 characters (counted in UTF-16 code units, as
the API does) and a rich text array at most 100 items, so long text is split
over several items and, if needed, several blocks; a request carries at most
100 blocks and stays well under the 500 KB payload cap (``chunk_blocks``).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Sequence
from typing import Any

from engine.core import redact

Block = dict[str, Any]
RichText = dict[str, Any]

MAX_TEXT_LENGTH = 2000
MAX_RICH_TEXT_ITEMS = 100
MAX_BLOCKS_PER_REQUEST = 100
MAX_REQUEST_BYTES = 400_000

# Languages the API accepts for code blocks (a subset of its enum), plus common aliases.
_LANGUAGES = frozenset({
    "bash", "c", "c#", "c++", "clojure", "css", "dart", "diff", "docker", "elixir", "erlang",
    "go", "graphql", "groovy", "haskell", "html", "java", "javascript", "json", "julia",
    "kotlin", "latex", "lua", "makefile", "markdown", "mermaid", "nix", "ocaml", "perl", "php",
    "plain text", "powershell", "protobuf", "python", "r", "ruby", "rust", "scala", "scss",
    "shell", "sql", "swift", "typescript", "xml", "yaml",
})
_ALIASES = {
    "py": "python", "python3": "python", "js": "javascript", "ts": "typescript", "sh": "shell",
    "zsh": "shell", "console": "shell", "yml": "yaml", "cpp": "c++", "cs": "c#", "csharp": "c#",
    "golang": "go", "rb": "ruby", "rs": "rust", "kt": "kotlin", "dockerfile": "docker",
    "md": "markdown", "text": "plain text", "txt": "plain text", "plaintext": "plain text",
    "ps1": "powershell", "patch": "diff", "proto": "protobuf", "tex": "latex",
}

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_FENCE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})\s*([^`\s]*)")
_DIVIDER = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_TASK = re.compile(r"^\[([ xX])\]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d{1,9}[.)]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_INLINE = re.compile(
    r"\\(?P<escaped>[!-/:-@\[-`{-~])"
    r"|\*\*(?P<bold>.+?)\*\*"
    r"|(?P<fence>`+)(?P<code>.+?)(?<!`)(?P=fence)(?!`)"
    r"|\[(?P<label>[^\]]+)\]\((?P<url>https?://[^\s)]+)\)"
    r"|(?<![\w*])\*(?P<italic>[^*\s](?:[^*]*[^*\s])?)\*(?![\w*])"
)


def link_target_ok(url: str) -> bool:
    """Whether ``url`` may go to Notion as a link: http(s), a host, no credentials, nothing odd in it."""
    if utf16_len(url) > MAX_TEXT_LENGTH or not url.isascii() or not url.isprintable():
        return False
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is no number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and "@" not in parts.netloc \
        and "\\" not in url


def utf16_len(text: str) -> int:
    """Length as the Notion API counts it (UTF-16 code units)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def split_text(text: str, limit: int = MAX_TEXT_LENGTH) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` UTF-16 units; joined they equal ``text``.

    A piece ends after the last whitespace of its final tenth when there is one,
    so words are rarely cut.
    """
    pieces: list[str] = []
    start = 0
    while start < len(text):
        units = 0
        end = start
        while end < len(text):
            width = 2 if ord(text[end]) > 0xFFFF else 1
            if units + width > limit:
                break
            units += width
            end += 1
        if end < len(text):
            floor = start + (end - start) * 9 // 10
            cut = max(text.rfind(" ", floor, end), text.rfind("\n", floor, end))
            if cut > start:
                end = cut + 1
        pieces.append(text[start:end])
        start = end
    return pieces


def _item(content: str, *, bold: bool = False, italic: bool = False, code: bool = False,
          url: str | None = None) -> RichText:
    item: RichText = {"type": "text", "text": {"content": content, "link": {"url": url} if url else None}}
    if bold or italic or code:
        item["annotations"] = {"bold": bold, "italic": italic, "code": code}
    return item


def plain_rich_text(text: str) -> list[RichText]:
    """``text`` as unformatted rich text items of at most 2,000 units each."""
    return [_item(piece) for piece in split_text(text)]


def inline_rich_text(text: str) -> list[RichText]:
    """Rich text items for one line or paragraph, with inline Markdown applied."""
    items: list[RichText] = []

    def add(content: str, **style: Any) -> None:
        for piece in split_text(content):
            items.append(_item(piece, **style))

    position = 0
    for match in _INLINE.finditer(text):
        if match.start() > position:
            add(text[position:match.start()])
        if match.group("escaped") is not None:
            add(match.group("escaped"))
        elif match.group("bold") is not None:
            add(match.group("bold"), bold=True)
        elif match.group("code") is not None:
            code = match.group("code")
            add(code[1:-1] if len(code) > 2 and code[0] == code[-1] == " " else code, code=True)
        elif match.group("italic") is not None:
            add(match.group("italic"), italic=True)
        else:
            url, label = match.group("url"), match.group("label")
            code_label = re.fullmatch(r"(`+)([^`]+)\1", label)  # a linked SHA: [`abc12345`](…/commit/…)
            add(code_label.group(2) if code_label else label, url=url if link_target_ok(url) else None,
                code=code_label is not None)
        position = match.end()
    if position < len(text):
        add(text[position:])
    return items


def _text_blocks(kind: str, items: list[RichText], **extra: Any) -> list[Block]:
    """One block of ``kind``, or several when the items exceed the per-array limit."""
    if not items:
        return [{"object": "block", "type": kind, kind: {"rich_text": [], **extra}}]
    return [
        {"object": "block", "type": kind, kind: {"rich_text": items[i:i + MAX_RICH_TEXT_ITEMS], **extra}}
        for i in range(0, len(items), MAX_RICH_TEXT_ITEMS)
    ]


def code_language(info: str) -> str:
    """Map a fence's info string to a language the API accepts (else ``plain text``)."""
    name = info.strip().lower()
    name = _ALIASES.get(name, name)
    return name if name in _LANGUAGES else "plain text"


def markdown_to_blocks(markdown: str) -> list[Block]:
    """Convert Markdown text to a flat list of Notion block objects (see module doc)."""
    # No control or bidi character reaches Notion, whatever the text was pinned to (steps.untrusted).
    lines = redact.neutralise(markdown.replace("\r\n", "\n").replace("\r", "\n"), keep_newlines=True).split("\n")
    blocks: list[Block] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.extend(_text_blocks("paragraph", inline_rich_text("\n".join(paragraph))))
            paragraph.clear()

    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker = fence.group(2)
            body: list[str] = []
            while index < len(lines) and not lines[index].strip().startswith(marker):
                body.append(lines[index])
                index += 1
            index += 1  # the closing fence (or the end of the text)
            blocks.extend(_text_blocks("code", plain_rich_text("\n".join(body)),
                                       language=code_language(fence.group(3))))
            continue
        if not line.strip():
            flush()
            continue
        if _DIVIDER.match(line):
            flush()
            blocks.append({"object": "block", "type": "divider", "divider": {}})
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = min(len(heading.group(1)), 3)
            blocks.extend(_text_blocks(f"heading_{level}", inline_rich_text(heading.group(2))))
            continue
        quote = _QUOTE.match(line)
        if quote:
            flush()
            quoted = [quote.group(1)]
            while index < len(lines) and (more := _QUOTE.match(lines[index])):
                quoted.append(more.group(1))
                index += 1
            blocks.extend(_text_blocks("quote", inline_rich_text("\n".join(quoted))))
            continue
        bullet = _BULLET.match(line)
        if bullet:
            flush()
            task = _TASK.match(bullet.group(1))
            if task:
                blocks.extend(_text_blocks("to_do", inline_rich_text(task.group(2)),
                                           checked=task.group(1) != " "))
            else:
                blocks.extend(_text_blocks("bulleted_list_item", inline_rich_text(bullet.group(1))))
            continue
        numbered = _NUMBERED.match(line)
        if numbered:
            flush()
            blocks.extend(_text_blocks("numbered_list_item", inline_rich_text(numbered.group(1))))
            continue
        paragraph.append(line.strip())
    flush()
    return blocks


def chunk_blocks(blocks: Sequence[Block], max_blocks: int = MAX_BLOCKS_PER_REQUEST,
                 max_bytes: int = MAX_REQUEST_BYTES) -> list[list[Block]]:
    """Split ``blocks`` (in order) into request-sized lists: at most ``max_blocks``
    each, and at most ``max_bytes`` of JSON each unless a single block is larger."""
    chunks: list[list[Block]] = []
    current: list[Block] = []
    size = 0
    for block in blocks:
        block_size = len(json.dumps(block, ensure_ascii=False).encode("utf-8"))
        if current and (len(current) >= max_blocks or size + block_size > max_bytes):
            chunks.append(current)
            current, size = [], 0
        current.append(block)
        size += block_size
    if current:
        chunks.append(current)
    return chunks


def block_text(block: Block) -> str:
    """The concatenated plain content of a block's rich text (for tests and checks)."""
    payload = block.get(block.get("type", ""), {})
    return "".join(item.get("text", {}).get("content", "") for item in payload.get("rich_text", []))
