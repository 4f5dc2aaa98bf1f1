"""The five cron fields read the way POSIX and Vixie cron read them, before croniter sees them.

croniter judges the syntax of what is left, but it reads three things differently from
cron, and the engine's reading decides (docs/DESIGN.md, "Cron dialect"):

* ``N-N`` (``9-9``, ``MON-MON``, ``5-5/2``) is the single value N; croniter reads it as the
  whole field, so ``0 9-9 * * 1-5`` would fire every hour;
* a ``*`` item in a list (``*,5``, ``*,sat#3``) makes the whole field ``*``; croniter keeps
  the ``'*'`` beside numbers and the expansion would fail on it;
* ``?`` is a ``*`` in the day fields (``?,5`` included) and refused elsewhere, as croniter does.

Pure string work: no croniter, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.core import errors

FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12), ("day-of-week", 0, 7))
_DAY_FIELDS = ("day-of-month", "day-of-week")
_NAMES = {
    "month": {name: number for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)},
    "day-of-week": {name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))},
}
_TOKEN = re.compile(r"^(?P<base>\*|\?|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/(?P<step>[0-9]+))?$")
_DIGITS = 4  # longer numbers are out of every range (and int() of thousands of digits raises)


@dataclass(frozen=True, slots=True)
class Reading:
    """One expression as the engine reads it: what croniter expands, and what it must also accept."""

    fields: tuple[str, ...]  # the five fields with N-N and list stars rewritten: croniter expands these
    as_written: tuple[str, ...]  # the same without the stars of lists: croniter must accept every item


def read(quoted: str, fields: list[str]) -> Reading:
    """The engine's reading of five fields; InvalidInput naming the field for the common mistakes."""
    reading, written = [], []
    for (name, low, high), value in zip(FIELDS, fields, strict=True):
        items, whole = _field(quoted, name, low, high, value)
        reading.append("*" if whole else ",".join(items))
        written.append(",".join(items) or "*")
    return Reading(tuple(reading), tuple(written))


def _field(quoted: str, name: str, low: int, high: int, value: str) -> tuple[list[str], bool]:
    """(the items other than ``*``, N-N made N; whether a ``*`` item makes it the whole field)."""
    items, whole = [], False
    for part in value.split(","):
        if not part:
            raise errors.InvalidInput(f"{quoted}: {name} has an empty list item")
        if part[0] in "HhRr" and (len(part) == 1 or part[1] in "(/"):
            # Hashed and random values depend on an id or on chance: slots must be reproducible.
            raise errors.InvalidInput(f"{quoted}: {name}: hashed and random values (H, R) are not supported")
        if part == "*" or (part == "?" and name in _DAY_FIELDS):
            whole = True
            continue
        match = _TOKEN.match(part)
        if match is not None:
            part = _single(quoted, name, low, high, match["base"], match["step"]) or part
        items.append(part)
    return items, whole


def _single(quoted: str, name: str, low: int, high: int, base: str, step: str | None) -> str | None:
    """Check a ``base[/step]`` item's numbers; the single value N when it is a range ``N-N``, else None."""
    if step is not None and not step.strip("0"):
        raise errors.InvalidInput(f"{quoted}: {name} step must be at least 1")
    if step is not None and len(step) > _DIGITS:
        raise errors.InvalidInput(f"{quoted}: {name} step is too large")
    if any(num.isdigit() and (len(num) > _DIGITS or not low <= int(num) <= high) for num in base.split("-")):
        raise errors.InvalidInput(f"{quoted}: {name} must be {low}-{high}")
    ends = base.split("-")
    if len(ends) == 2:
        first, last = (_number(name, end) for end in ends)
        if first is not None and first == last:
            return ends[0]  # POSIX: the range N-N is N (with any step, the one value N)
    return None


def _number(name: str, text: str) -> int | None:
    """A field value as a number (``7`` stays 7: Sunday only as a single value), names included."""
    if text.isdigit():
        return int(text)
    return _NAMES.get(name, {}).get(text.lower())
