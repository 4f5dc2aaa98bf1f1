r"""Text from outside on its way into a report's Markdown: commit text, and the model's own.

A commit author controls subjects, names and file names; through them, a model's narrative too.
The rules are versioned and pinned per run as ``text_rules`` (runs pinned before render with
their own version, byte for byte as they did):

- rules 1: control and format characters (ESC, BEL, bidi overrides) are removed, line breaks
  become spaces, so ``cat`` of a report runs nothing in a terminal; Markdown punctuation is
  backslash-escaped in running text, so a subject cannot make a live link or image; a code
  span's fence is longer than any run of backticks inside it, so a backtick in a file name
  cannot end the span.
- rules 2 (issue 36): one rule for every source. Commit text also escapes ``&`` (``&#x202E;``
  would decode to a bidi override) and defangs a bare URL, ``www.`` name or e-mail address
  (``https\://…``, ``www\.…``, ``a\@b``: shown as written, but GFM's autolinker no longer
  sees one). The model's narrative (``narrative``) keeps its Markdown (headings, lists,
  emphasis, code) but loses control and bidi characters, character references that decode to
  them, and every live link or image (inline, reference, autolink, raw HTML, bare URL): shown as
  text, unless it points into the project's own forge (``redact.link_allowed``).
  ``foreign_links`` lists what the narrative links to elsewhere: a grounding violation.
- rules 3 (issue 34): commit text reads as written in the file too. Nothing is escaped that a
  renderer would not act on: ``(#7497)``, ``snake_case``, ``dependabot[bot]`` stay as they are,
  and a balanced code span in a subject stays a code span. A word that a renderer would act on
  (emphasis at a word's edge such as ``__getattr__`` or ``*.lock``, ``](``, ``<tag``, a
  character reference, a URL or e-mail address, a backslash before punctuation) becomes a code
  span of its own: inert, shown as written, with no backslash in the file. Only ``|`` (a table
  would split at it) and a backtick without its pair are backslash-escaped. A ``#N`` reference
  becomes a link to the project's forge when one is known (``steps.forge_links``).
- rules 4 (security round 3): inert under Python-Markdown (as MkDocs sets it up) and GitHub's
  cmark-gfm too, not only CommonMark. ``<`` and the ``&`` of a character reference are written as
  entities (``&lt;``, ``&amp;``: Python-Markdown reads ``\<`` and ``\&`` as a backslash and live
  HTML), an ``&`` that may begin a reference without its ``;`` too; an e-mail address, or a URL
  holding an ``@``, is a code span (GitHub links an address whatever is escaped in it); ``www.``
  before a space is defanged; a fenced code block gets a plain info string and is closed if left
  open (Python-Markdown reads such a fence as prose). ``tests/unit/test_renderers.py`` renders with
  all three.

Why here, at rendering, and not at COLLECT_GIT's output: escaping depends on where the
text lands (running text, a code span, the model's prompt), and the stored output stays
what git said. docs/DESIGN.md "Untrusted commit text".
"""

from __future__ import annotations

import html
import re
import urllib.parse
from collections.abc import Callable

from engine.core import redact
from steps.forge_links import REFERENCE, ForgeLinks

#: The rules that make the model's text inert and escape character references (issue 36).
LINK_RULES = 2
#: The rules that escape only what a renderer would act on (issue 34).
PLAIN_RULES = 3
#: The rules that are inert under Python-Markdown and GitHub's renderer too (security round 3): a ``<`` or a
#: character reference's ``&`` is written as an entity (``&lt;``, ``&amp;``: Python-Markdown does not read
#: ``\<`` or ``\&`` as escapes), and an e-mail address in the model's text is a code span (GitHub links one
#: whatever is escaped in it).
ENTITY_RULES = 4


def _escaped(char: str, rules: int) -> str:
    """One Markdown-active character shown as written: an entity for ``<`` and ``&`` from rules 4, else a
    backslash escape."""
    if rules >= ENTITY_RULES and char in "<&":
        return "&lt;" if char == "<" else "&amp;"
    return "\\" + char


def _escape_specials(text: str, rules: int) -> str:
    """Every character of ``_SPECIAL_2`` in ``text`` escaped (``_escaped``)."""
    return _SPECIAL_2.sub(lambda match: _escaped(match.group(1), rules), text)

_SPECIAL = re.compile(r"([\\`*_\[\]<>!|~()])")
_SPECIAL_2 = re.compile(r"([\\`*_\[\]<>!|~()&])")
_TICKS = re.compile(r"`+")
# What a renderer may turn into a link by itself: a URL with a scheme, a www. name (GFM's
# extended autolinks) and an e-mail address. Escaping the character GFM's autolinker keys on
# (the ":" of "://", the "." of "www.", the "@") keeps the text as written and the link dead.
_URL = r"(?:[A-Za-z][A-Za-z0-9+.\-]*://|(?<![A-Za-z0-9.\-])www\.(?=[A-Za-z0-9_\-]))[^\s<>`|\[\]()\"'\\]*"
_EMAIL = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+"
# Every place such a link could start, escaped wherever it stands (an address recognised in one
# place can hide a scheme GFM would see in another: "a@b.https://x").
_DEFANG = re.compile(r"@|:(?=//)|(?<![A-Za-z0-9\-])www\.(?=[A-Za-z0-9_\-])")
# Left out of the end of a bare URL, as GFM does ("see https://x.example." ends at the name).
_TRAILING = ".,:;!?*_~"
_ENTITY = r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"
# One token of the model's prose, leftmost first. A code span is recognised only where CommonMark
# would see one for sure (one line, no pipe that a table would split at, no "<" that could open an
# autolink or tag taking precedence, whole backtick runs): everything it holds is inert. Other text
# is read token by token, so a span missed here only costs a visible backslash, never a live link.
_PROSE = re.compile(
    r"(?P<escape>\\[!-/:-@\[-`{-~])"
    r"|(?<!`)(?P<span>(?P<ticks>`++)[^\n|<`](?:[^\n|<]*?[^\n|<`])??(?P=ticks)(?!`))"
    r"|(?P<tickrun>`++)"
    r"|(?P<link>(?P<bang>!?)\[(?P<label>[^\[\]\n]*)\]\((?P<target>[^\s()<>`]*)\))"
    r"|(?P<autolink><(?P<auto>[A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*)>)"
    r"|(?P<html><(?P<tag>[A-Za-z][A-Za-z0-9]*)\b[^>\n]*>?)"
    f"|(?P<url>{_URL})"
    f"|(?P<email>{_EMAIL})"
    f"|(?P<entity>{_ENTITY})"
    r"|(?P<punct>[\[\]<])"
    f"|(?P<defang>{_DEFANG.pattern})"
    r"|(?P<amp>&(?=[#A-Za-z]))"  # a reference without its ";": HTML decodes some of those too
    r"|(?P<www>(?<![A-Za-z0-9\-])www\.)"  # GitHub links "www." before a space as well
)
_HREF = re.compile(r"""\b(?:href|src)\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_SCP = re.compile(r"^(?:[A-Za-z0-9._-]+@)?(?P<host>[A-Za-z0-9.-]+):(?!//)(?P<path>\S+)$")
_ENTITIES = re.compile(_ENTITY)
_ESCAPE = re.compile(r"\\[!-/:-@\[-`{-~]")
_FORGE_PATH = re.compile(r"[A-Za-z0-9._~-]+(?:/[A-Za-z0-9._~-]+)*")
_HOST = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")


def _one_line(text: str, rules: int) -> str:
    clean = redact.neutralise(text) if rules >= 1 else text
    return " ".join(clean.split())


def text(value: str, rules: int, links: ForgeLinks | None = None) -> str:
    """``value`` as running Markdown text: one line, inert (rules >= 1), safe in a table cell.
    From rules 3 a ``#N`` reference links to the forge ``links`` names."""
    line = _one_line(value, rules)
    if rules < 1:
        return line.replace("|", "\\|")
    if rules < LINK_RULES:
        return _SPECIAL.sub(r"\\\1", line)
    if rules < PLAIN_RULES:
        return _defanged(_SPECIAL_2.sub(r"\\\1", line))
    return _as_written(line, links or ForgeLinks(None), rules)


# A word a renderer would act on (rules 3): an emphasis or strikethrough run at a word's edge, a
# "*" or "~" inside one, the "](" "][" "]:" of a link or reference definition, "<" opening an
# autolink or a tag, a character reference, an escaping backslash, a closing "#" run of a heading,
# or a URL, www. name or e-mail address GFM's autolinker would see.
_ACTIVE_WORD = re.compile(
    r"(?:^|(?<=\W))[_*~]|[_*~](?:$|(?=\W))|(?<=\w)[*~](?=\w)|\][(\[:]|<[A-Za-z/!?]|\\(?:[!-/:-@\[-`{-~]|$)|^#+$"
    f"|{_ENTITY}|{_DEFANG.pattern}")
# Rules 4: what a renderer may still act on in a word that rules 3 left as it is: "www." before a space (GitHub
# links it) and an "&" that may begin a reference without its ";" (HTML decodes some of those).
_LOOSE = re.compile(r"(?<![A-Za-z0-9\-])www\.|&[#A-Za-z]")
_BARE_WWW = re.compile(r"(?<![A-Za-z0-9\-\\])www\.")
# A code span as CommonMark reads it on one line: a backtick run and the next run of the same length.
_SPAN = re.compile(r"(?<!`)(?P<ticks>`+)(?!`)(?P<body>.*?)(?<!`)(?P=ticks)(?!`)")


def _as_written(line: str, links: ForgeLinks, rules: int) -> str:
    """Rules 3: ``line`` with its balanced code spans kept, every active word a code span of its own,
    ``|`` and unpaired backticks escaped, and ``#N`` references linked."""
    out: list[str] = []
    at = 0
    spans = [span for span in _SPAN.finditer(line) if "|" not in span.group()]  # a table would split one
    for span in spans:
        out.append(_prose_words(line[at:span.start()], links, left=at > 0, right=True, rules=rules, line=line))
        out.append(span.group())
        at = span.end()
    out.append(_prose_words(line[at:], links, left=at > 0, right=False, rules=rules, line=line))
    return "".join(out)


def _prose_words(prose: str, links: ForgeLinks, *, left: bool, right: bool, rules: int, line: str = "") -> str:
    """The words of ``prose``; ``left``/``right``: a kept code span touches its first/last character,
    so a word there cannot become a code span of its own (two backtick runs would merge)."""
    words = prose.split(" ")
    for i, word in enumerate(words):
        on_left, on_right = i == 0 and left, i == len(words) - 1 and right
        touching = on_left or on_right
        if _ACTIVE_WORD.search(word) or "`" in word or "|" in word or (rules >= ENTITY_RULES and _LOOSE.search(word)):
            if touching or "`" in word or "|" in word:
                words[i] = _inert_word(word, rules, line, spans=(on_left, on_right))
            else:
                words[i] = _word_span(word, rules)
        else:
            words[i] = REFERENCE.sub(lambda ref: _reference(ref, links), word)
    return " ".join(words)


_SPAN_EDGES = re.compile(r"^(?P<lead>\(?)(?P<core>.*?)(?P<trail>[.,;:!?)]*)$")


def _word_span(word: str, rules: int) -> str:
    """An active word as a code span of its own; from rules 4 without the punctuation around it (``_Budget);``
    reads as code ``_Budget`` then ``);``) when what is left is still what needed the span."""
    if rules >= ENTITY_RULES:
        parts = _SPAN_EDGES.match(word)
        if parts is not None and (parts["lead"] or parts["trail"]) and parts["core"]:
            core = parts["core"]
            balanced = core.count("(") == core.count(")") and core.count("[") == core.count("]")
            if balanced and (_ACTIVE_WORD.search(core) or _LOOSE.search(core)):
                return f"{parts['lead']}`{core}`{parts['trail']}"
    return f"`{word}`"


def _inert_word(word: str, rules: int, line: str = "", spans: tuple[bool, bool] = (False, False)) -> str:
    """A word that cannot be a code span of its own, escaped as rules 2 escape (``_escaped``); from rules 4 a
    ``www.`` wherever it stands too, and an ``@`` a code span of its own (GitHub links an address whatever
    is escaped in it); ``line`` is the word's line, whose backtick runs that span must not pair with, and
    ``spans`` whether a kept code span touches the word's start and end."""
    if rules < ENTITY_RULES:
        return _defanged(_escape_specials(word, rules))
    pieces = word.split("@")
    inert = [_BARE_WWW.sub("www\\.", _DEFANG.sub(lambda key: "\\" + key.group() if key.group() != "www." else
                                                   "www\\.", _escape_specials(piece, rules))) for piece in pieces]
    out = inert[0]
    for index, piece in enumerate(inert[1:], start=1):
        joined = ("`" if spans[0] else "") + out + "@" + piece + ("`" if spans[1] and index == len(inert) - 1 else "")
        at = len(out) + (1 if spans[0] else 0)
        out = out + _code_piece("@", joined, at, at + 1, line) + piece
    return out


def _code_piece(text: str, context: str, start: int, end: int, line: str = "") -> str:
    """``text`` as a code span inside ``context`` (where it replaces ``[start, end)``; ``line`` around it): its
    fence longer than any backtick run there, so no stray backtick pairs with it, and kept apart by a space
    from a backtick or a backslash beside it (which would join or escape its fence)."""
    fence = "`" * (max((len(run) for run in _TICKS.findall(context + line)), default=0) + 1)
    before = " " if context[start - 1:start] in ("`", "\\") and start > 0 else ""
    beyond = " " if context[end:end + 1] == "`" else ""
    return f"{before}{fence} {text} {fence}{beyond}"


def _reference(ref: re.Match[str], links: ForgeLinks) -> str:
    url = links.reference(int(ref["number"]))
    return f"[{ref.group()}]({url})" if url else ref.group()


def plain(value: str, rules: int) -> str:
    """``value`` for the model's prompt: one line, without control characters (rules >= 1); not escaped."""
    return _one_line(value, rules).replace("|", "\\|")


def code(value: str, rules: int) -> str:
    """``value`` as a Markdown code span that no backtick inside it can close early."""
    line = _one_line(value, rules).replace("|", "\\|")
    if rules < 1:
        return f"`{line}`"
    fence = "`" * (max((len(run) for run in _TICKS.findall(line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def _defanged(text: str) -> str:
    """``text`` with no bare URL, ``www.`` name or e-mail address GFM's autolinker recognises: every
    ``@``, the ``:`` of ``://`` and the ``.`` of ``www.`` backslash-escaped (rendered as written)."""
    return _DEFANG.sub(lambda key: "www\\." if key.group() == "www." else "\\" + key.group(), text)


def narrative(markdown: str, rules: int, forge: str | None = None) -> str:
    """The model's Markdown, inert (rules >= 2; earlier rules return it as it was).

    Control and bidi characters are removed (line breaks kept). Fenced code blocks and code spans
    stay as written: nothing in them is live. In the prose, ``[``, ``]`` and ``<`` are escaped
    (no inline link, image, reference, autolink or raw HTML can form), a bare URL, ``www.`` name
    or e-mail address is defanged (``_defanged``), and a character reference that would decode to
    a removed character is escaped. A link, image or URL into ``forge`` (``redact.link_allowed``)
    is kept, its label made inert. Applying it twice changes nothing more.
    """
    if rules < LINK_RULES:
        return markdown
    clean = redact.neutralise(markdown, keep_newlines=True)
    if rules >= ENTITY_RULES:
        clean = _settled_fences(clean)
    return _by_blocks(clean, lambda prose: _prose(prose, forge, rules=rules))


_INFO = re.compile(r"[^\w#.+-]")


def _settled_fences(markdown: str) -> str:
    """Fenced code blocks every renderer reads alike (rules 4): an info string of word characters only (Python-
    Markdown's fenced code takes no other, and reads the fence as prose), and a fence left open closed at the
    end (CommonMark runs it to the end; Python-Markdown would read it as prose)."""
    from markdown_it import MarkdownIt

    lines = markdown.split("\n")
    closing: list[str] = []
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type != "fence" or not token.map:
            continue
        start, end = token.map
        opening = lines[start]
        indent = opening[:len(opening) - len(opening.lstrip())]
        lines[start] = f"{indent}{token.markup}{_INFO.sub('', token.info)}"
        last = lines[end - 1].strip() if end - 1 > start else ""
        if not (last.startswith(token.markup[0] * len(token.markup)) and set(last) <= {token.markup[0]}):
            closing.append(f"{indent}{token.markup}")
    return "\n".join(lines + closing[-1:])


def foreign_links(markdown: str, forge: str | None = None) -> list[str]:
    """Every link target a renderer would make live in ``markdown`` (inline links and images,
    autolinks, raw ``<a href>``/``<img src>``, bare URLs, ``www.`` names, e-mail addresses)
    that does not point into ``forge``, in order; code is left out."""
    found: list[str] = []
    _by_blocks(markdown, lambda prose: _prose(prose, forge, found))
    return found


def _by_blocks(markdown: str, transform: Callable[[str], str]) -> str:
    """``transform`` applied to the lines outside code blocks, fenced or indented, at any depth
    (lists, quotes), as markdown-it (CommonMark) reads the block structure; code lines are kept.
    What ``transform`` changes (backslashes, no backticks, no leading whitespace) cannot move a
    block's edges."""
    from markdown_it import MarkdownIt

    lines = markdown.split("\n")
    code = [False] * len(lines)
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type in ("fence", "code_block") and token.map:
            start, end = token.map
            code[start:end] = [True] * (end - start)
    out: list[str] = []
    index = 0
    while index < len(lines):
        end = index
        while end < len(lines) and code[end] == code[index]:
            end += 1
        chunk = "\n".join(lines[index:end])
        out.append(chunk if code[index] else transform(chunk))
        index = end
    return "\n".join(out)


def _prose(prose: str, forge: str | None, found: list[str] | None = None, *, rules: int = LINK_RULES) -> str:
    """One stretch of prose made inert under ``rules`` (see ``narrative``); foreign targets appended to ``found``."""
    def note(target: str) -> None:
        if found is not None and not redact.link_allowed(target, forge):
            found.append(target)

    def inert(match: re.Match[str]) -> str:
        kind = match.lastgroup
        whole = match.group()
        if kind == "escape" and whole[1] in "<&":
            return _escaped(whole[1], rules)  # Python-Markdown reads neither as an escape
        if kind in ("escape", "span", "tickrun"):
            return whole
        if kind == "link":
            note(match["target"])
            label = _prose(match["label"], forge, found, rules=rules)
            if redact.link_allowed(match["target"], forge):
                return f"{match['bang']}[{label}]({match['target']})"
            return f"{match['bang']}\\[{label}\\]({_prose(match['target'], forge, rules=rules)})"
        if kind == "autolink":
            note(match["auto"])
            if redact.link_allowed(match["auto"], forge):
                return whole
            return _escaped("<", rules) + _prose(match["auto"], forge, rules=rules) + ">"
        if kind == "html":
            if match["tag"].lower() in ("a", "img"):
                for target in _HREF.findall(whole):
                    note(target)
            return _escaped("<", rules) + _prose(whole[1:], forge, rules=rules)
        if kind in ("url", "email"):
            core = whole.rstrip(_TRAILING)
            note(core)
            # Kept live only where GFM's link would end with it too: it runs on to a space, a "<" or
            # an escape (which the next pass may have written for that "<").
            after = match.string[match.end():match.end() + 2]
            ends = after[:1] in ("", "<" if rules < ENTITY_RULES else "") or after[:1].isspace() or (
                _ESCAPE.match(after) is not None and after[1:2] not in ("<" if rules >= ENTITY_RULES else "",))
            if kind == "url" and ends and redact.link_allowed(core, forge):
                return _ENTITIES.sub(lambda ref: _entity(ref, rules),
                                     core + _escape_specials(whole[len(core):], rules))
            if rules >= ENTITY_RULES and "`" not in whole and (kind == "email" or "@" in whole):
                # GitHub links an address whatever is escaped in it; not one in a code span.
                return _code_piece(whole, match.string, match.start(), match.end())
            return _defanged(_escape_specials(whole, rules))
        if kind == "entity":
            return _entity(match, rules)
        if kind in ("amp", "www"):
            return whole if rules < ENTITY_RULES else "&amp;" if kind == "amp" else "www\\."
        if whole == "www.":
            return "www\\."
        return _escaped(whole, rules) if whole == "<" else "\\" + whole  # [ ] @, the ":" of "://"

    return _PROSE.sub(inert, prose)


def _entity(match: re.Match[str], rules: int) -> str:
    """A character reference, escaped (shown as written) when it would decode to a removed character."""
    decoded = html.unescape(match.group())
    if redact.neutralise(decoded) == decoded:
        return match.group()
    return _escaped("&", rules) + match.group()[1:]


def forge_of(remote: str) -> str | None:
    """The https web address of the forge behind a git remote URL, or None (a local path, an
    unknown scheme, an odd host or path).

    ``git@github.com:org/repo.git``, ``ssh://git@github.com/org/repo`` and
    ``https://user@github.com/org/repo.git`` all give ``https://github.com/org/repo``: no
    credentials, no port, no ``.git``.
    """
    remote = remote.strip()
    if "://" in remote:
        try:
            parts = urllib.parse.urlsplit(remote)
            host, path = parts.hostname or "", parts.path
        except ValueError:
            return None
        if parts.scheme.lower() not in ("https", "http", "ssh", "git", "git+ssh", "ssh+git"):
            return None
    else:
        scp = _SCP.match(remote)
        if scp is None:
            return None
        host, path = scp["host"], scp["path"]
    path = path.strip("/").removesuffix(".git").strip("/")
    if not _HOST.fullmatch(host) or not _FORGE_PATH.fullmatch(path) or any(
            part in (".", "..") for part in path.split("/")):
        return None
    return f"https://{host.lower()}/{path}"
