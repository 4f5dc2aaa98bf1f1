"""The parsers of what an operator types (run ids, dates, instants), shared by the CLI and the web.

Each either returns a value every later computation can use or raises ``InvalidInput``
with a one-line message: ASCII digits only (``²`` and ``١`` are digits to ``str.isdigit``
but not ids), and dates and instants inside ``MIN_DAY``..``MAX_DAY`` so that period
arithmetic and time zones never overflow.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

from engine.core import errors

MAX_RUN_ID = 10**18 - 1  # 18 digits: well inside BIGINT
MIN_DAY = date(1900, 1, 1)
MAX_DAY = date(9000, 12, 31)
_ASCII_DIGITS = re.compile(r"[0-9]{1,18}")
_SHOWN = 40


def _shown(text: str) -> str:
    """The user's text quoted back safely: one line, clipped."""
    clean = "".join(c if c.isprintable() else "?" for c in text)
    return clean if len(clean) <= _SHOWN else clean[:_SHOWN] + "…"


def run_id(text: str) -> int:
    """A run id from ``text``: 1 to 18 ASCII digits, not zero; anything else is ``InvalidInput``."""
    if _ASCII_DIGITS.fullmatch(text) is None or not 0 < int(text) <= MAX_RUN_ID:
        raise errors.InvalidInput(f"'{_shown(text)}' is not a run id (a positive number, see `reportflow runs list`)")
    return int(text)


def check_day(day: date, what: str) -> date:
    """``day`` itself, or ``InvalidInput`` when it lies outside ``MIN_DAY``..``MAX_DAY``."""
    if not MIN_DAY <= day <= MAX_DAY:
        raise _out_of_range(day, what)
    return day


def _out_of_range(day: date, what: str) -> errors.InvalidInput:
    return errors.InvalidInput(f"{what} {day.isoformat()} is out of range ({MIN_DAY}..{MAX_DAY})")


def day(text: str, what: str) -> date:
    """A calendar date ``YYYY-MM-DD`` within range; anything else is ``InvalidInput`` naming ``what``."""
    if not text.isascii():
        raise errors.InvalidInput(f"{what} '{_shown(text)}' is not a date (YYYY-MM-DD)")
    try:
        value = date.fromisoformat(text)
    except ValueError:
        raise errors.InvalidInput(f"{what} '{_shown(text)}' is not a date (YYYY-MM-DD)") from None
    return check_day(value, what)


def instant(text: str) -> datetime:
    """An ISO 8601 instant with an offset, in UTC and within range; anything else is ``InvalidInput``."""
    raw = text.strip()
    example = "e.g. 2026-09-29T10:30:00Z"
    if not raw.isascii():
        raise errors.InvalidInput(f"'{_shown(text)}' is not an ISO 8601 instant ({example})")
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise errors.InvalidInput(f"'{_shown(text)}' is not an ISO 8601 instant ({example})") from None
    if value.tzinfo is None:
        raise errors.InvalidInput(f"'{_shown(text)}' has no UTC offset; write it as 2026-09-29T10:30:00Z")
    try:
        value = value.astimezone(UTC)
    except OverflowError:
        raise errors.InvalidInput(f"'{_shown(text)}' is out of range ({MIN_DAY}..{MAX_DAY})") from None
    if not MIN_DAY <= value.date() <= MAX_DAY:  # the message is built only here: instants are parsed per step
        raise _out_of_range(value.date(), f"'{_shown(text)}':")
    return value
