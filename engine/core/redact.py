"""What reaches a log line, an error message, a stored row, a page or a terminal from outside.

Three concerns, one module: credentials inside URLs (``http://user:pass@host``) are masked as
``user:***@`` by ``mask_urls``; text a server, a model, a commit author or a user name controls is
made inert by ``neutralise`` (control characters, ESC, BEL and bidi overrides removed); and error
text is cut to ``limits.ERROR_TEXT`` by ``clip`` before it is stored or logged. Every one of them
takes time linear in the text: a server may answer with megabytes.

``link_allowed`` is the one rule for which link may stay live in text from outside: only one into
the project's own forge (the reports' Markdown, the page).
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse

from engine.core import limits

# scheme://userinfo@ where userinfo holds a password (user:pass) or is a bare token (token@).
# A scheme starts at the first letter of a run of scheme characters; the look-behind anchors each try
# at the start of such a run and the possessive quantifiers never give back what they took, so a long
# run that is no scheme is read once, not once per starting position (which made the old pattern
# quadratic: 2 s for 40,000 letters after an "@").
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.\-])(?P<lead>[0-9+.\-]*+)(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*+://)"
                       r"(?P<user>[^\s:/@?#]*+)(?P<password>:[^\s/?#]*)?@")
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_REMOVED_CATEGORIES = ("Cc", "Cf", "Cs", "Co")
_REMEMBERED = 1 << 17  # characters whose verdict a translate table keeps (about 10 MB at most)


def _mask(match: re.Match[str]) -> str:
    if match["password"] is None:  # https://TOKEN@host: the user part is the secret
        return f"{match['lead']}{match['scheme']}***@"
    return f"{match['lead']}{match['scheme']}{match['user']}:***@"


def mask_urls(text: str) -> str:
    """``text`` with every URL's password masked as ``user:***@`` (a bare ``token@`` as ``***@``).

    Linear in ``len(text)``: 20 MB of server text is masked in well under a second.
    """
    if "@" not in text or "://" not in text:
        return text
    return _USERINFO.sub(_mask, text)


class _Inert(dict[int, "int | str | None"]):
    """A ``str.translate`` table: control, format (bidi overrides, zero-width), surrogate and private
    characters map to None (removed), a line break or tab to a space unless kept, everything else to
    itself. Each character's category is looked up once, on first sight, and remembered: ``translate``
    then runs in C (20 MB in about a second, most of it when every line holds an escape)."""

    def __init__(self, keep_newlines: bool) -> None:
        kept = {ord("\n"): ord("\n"), ord("\t"): ord("\t")} if keep_newlines else {ord(c): " " for c in "\n\t"}
        super().__init__({**kept, ord("\r"): " "})

    def __missing__(self, point: int) -> int | None:
        char = chr(point)
        shown = None if char in _BIDI or unicodedata.category(char) in _REMOVED_CATEGORIES else point
        if len(self) < _REMEMBERED:  # text with every code point in it must not grow the table without end
            self[point] = shown
        return shown


_ONE_LINE = _Inert(keep_newlines=False)
_KEEP_LINES = _Inert(keep_newlines=True)


def neutralise(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` without control, format (bidi overrides, zero-width) or private characters.

    A newline or tab becomes a space unless ``keep_newlines`` (a carriage return always does);
    every other such character is removed, so ``cat`` of a report or a log line cannot run a
    terminal escape and no bidi override can reorder what a reader sees.
    """
    if text.isprintable():
        return text
    return text.translate(_KEEP_LINES if keep_newlines else _ONE_LINE)


def clip(text: str, limit: int = limits.ERROR_TEXT) -> str:
    """``text`` cut to its first ``limit`` characters, with a marker saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters cut]"


def echoed(value: object, limit: int = limits.ECHOED_VALUE) -> str:
    """``repr(value)`` as an error quotes a bad value: at most ``limit`` characters, then an ellipsis
    and the value's length, so a model's four-megabyte name costs the reader one line."""
    shown = repr(value)
    if len(shown) <= limit:
        return shown
    size = len(value) if isinstance(value, str | bytes) else len(shown)
    return f"{shown[:limit]}…{shown[-1]} ({size:,} characters)"  # the closing quote kept: one quoted value


def error_text(text: str, *, inert: bool = False) -> str:
    """Error text as it may be stored or logged: URL passwords masked, then cut to ``limits.ERROR_TEXT``;
    with ``inert`` also one line without control characters (masked again, in case removing them
    joined a URL). Masking comes before the cut, so no cut can separate a password from its ``@``."""
    clipped = clip(mask_urls(text))
    return mask_urls(neutralise(clipped)) if inert else clipped


#: The pages of a project a link from outside may open: a commit, an issue, a pull or merge request (GitHub,
#: GitLab's ``/-/`` form, Gitea and Forgejo, Bitbucket), with its files or commits tab; nothing else.
_FORGE_PAGE = re.compile(r"(?:-/)?(?:commits?/[0-9a-f]{1,64}|"
                         r"(?:issues|pull|pulls|merge_requests|pull-requests)/[1-9][0-9]{0,8})"
                         r"(?:/(?:files|commits|diffs|changes))?")
_FRAGMENT = re.compile(r"[A-Za-z0-9_.\-]{0,128}")


def link_allowed(url: str, forge: str | None) -> bool:
    """Whether a link to ``url`` in text from outside may stay live: only to one of the project's own pages.

    ``forge`` is the project's web URL (``https://host/owner/repo``, no trailing slash) or None (no forge known:
    no link stays). The URL must be https, on the forge's host exactly (no user, no port, no other spelling),
    with a path that is the forge's followed by a commit, issue or pull request page (``_FORGE_PAGE``), no
    query, and at most a plain fragment. Anything a browser would rewrite before following it (a backslash, a
    percent escape, a ``.``/``..`` segment, an empty segment) cannot match, so what is checked is what opens.
    """
    if not forge or not url.isascii() or not url.isprintable() or "\\" in url or "%" in url:
        return False
    try:
        parts, home = urllib.parse.urlsplit(url), urllib.parse.urlsplit(forge)
    except ValueError:
        return False
    if url[:8].lower() != "https://" or home.scheme != "https" or parts.netloc != home.netloc.lower() \
            or parts.query or url.count("#") > 1 or not _FRAGMENT.fullmatch(parts.fragment):
        return False
    prefix = home.path.rstrip("/") + "/"
    return parts.path.startswith(prefix) and _FORGE_PAGE.fullmatch(parts.path[len(prefix):]) is not None