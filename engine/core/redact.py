"""What reaches a log line, an error message, a stored row, a page or a terminal from outside.

Two concerns, one module: credentials inside URLs (``http://user:pass@host``) are masked as
``user:***@`` by ``mask_urls``, and text a server or a commit author controls is made inert
by ``neutralise`` (control characters, ESC, BEL and bidi overrides removed).
"""

from __future__ import annotations

import re
import unicodedata

# scheme://userinfo@ where userinfo holds a password (user:pass) or is a bare token (token@).
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s:/@?#]*)(?P<password>:[^\s/?#]*)?@")
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _mask(match: re.Match[str]) -> str:
    if match["password"] is None:  # https://TOKEN@host: the user part is the secret
        return f"{match['scheme']}***@"
    return f"{match['scheme']}{match['user']}:***@"


def mask_urls(text: str) -> str:
    """``text`` with every URL's password masked as ``user:***@`` (a bare ``token@`` as ``***@``)."""
    if "@" not in text:
        return text
    return _USERINFO.sub(_mask, text)


def _inert(char: str, keep_newlines: bool) -> bool:
    if char in "\n\t" and keep_newlines:
        return True
    if char in _BIDI:
        return False
    return unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Co")


def neutralise(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` without control, format (bidi overrides, zero-width) or private characters.

    A newline or tab becomes a space unless ``keep_newlines``; every other such character
    is removed, so ``cat`` of a report or a log line cannot run a terminal escape.
    """
    if text.isprintable():
        return text
    out = []
    for char in text:
        if _inert(char, keep_newlines):
            out.append(char)
        elif char in "\n\r\t":
            out.append(" ")
    return "".join(out)


def server_text(text: str, limit: int = 300) -> str:
    """Text a server sent back, fit for one log line or a stored ``error_message``: masked, one line, clipped."""
    clean = neutralise(mask_urls(text))
    return clean if len(clean) <= limit else clean[:limit] + "…"
