"""Plain-words descriptions of common cron expressions ("every day at 19:30").

Pure and small on purpose: it recognises the shapes operators write most
(fixed times on every day, on weekdays, on listed weekdays, on a day of the
month; every N minutes or hours) and falls back to the expression itself for
anything else, so a description is never wrong, at worst unhelpful.
"""

from __future__ import annotations

from engine.core.cron import expression

_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_DAY_ABBR = {name[:3].lower(): index for index, name in enumerate(_DAY_NAMES[:7])}


def _number(text: str, low: int, high: int) -> int | None:
    if not text.isdigit():
        return None
    value = int(text)
    return value if low <= value <= high else None


def _step(text: str) -> int | None:
    """``*/N`` as N."""
    if text.startswith("*/"):
        return _number(text[2:], 1, 59)
    return None


def _weekdays(text: str) -> str | None:
    """Day-of-week field in words: ``1-5`` weekdays, ``0,6`` weekends, a list or a range of days."""
    lowered = text.lower()
    if lowered in ("1-5", "mon-fri"):
        return "on weekdays"
    if lowered in ("0,6", "6,0", "sat,sun", "sun,sat", "6-7"):
        return "on weekends"
    days: list[int] = []
    for part in lowered.split(","):
        if "-" in part:
            bounds = [_day(b) for b in part.split("-", 1)]
            if bounds[0] is None or bounds[1] is None or bounds[0] > bounds[1]:
                return None
            days.extend(range(bounds[0], bounds[1] + 1))
            continue
        day = _day(part)
        if day is None:
            return None
        days.append(day)
    names = [_DAY_NAMES[d] for d in days]
    if len(names) == 1:
        return f"every {names[0]}"
    return "on " + ", ".join(names[:-1]) + " and " + names[-1]


def _day(text: str) -> int | None:
    if text in _DAY_ABBR:
        return _DAY_ABBR[text]
    return _number(text, 0, 7)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def describe(expr: str) -> str:
    """``"30 19 * * *"`` -> ``"every day at 19:30"``; anything unrecognised is returned unchanged."""
    text = expression.ALIASES.get(expr.strip().lower(), expr.strip())
    fields = text.split()
    if len(fields) != 5:
        return expr
    minute, hour, dom, month, dow = fields
    if month != "*":
        return expr
    if fields == ["*", "*", "*", "*", "*"]:
        return "every minute"
    every_minutes = _step(minute)
    if every_minutes is not None and hour == "*" and dom == "*" and dow == "*":
        return f"every {every_minutes} minutes"
    m = _number(minute, 0, 59)
    if m is None:
        return expr
    if hour == "*" and dom == "*" and dow == "*":
        return f"every hour at minute {m}"
    every_hours = _step(hour)
    if every_hours is not None and dom == "*" and dow == "*":
        return f"every {every_hours} hours at minute {m}"
    h = _number(hour, 0, 23)
    if h is None:
        return expr
    at = f"at {h:02d}:{m:02d}"
    if dom == "*" and dow == "*":
        return f"every day {at}"
    if dom == "*":
        days = _weekdays(dow)
        return f"{days} {at}" if days else expr
    if dow == "*":
        day = _number(dom, 1, 31)
        return f"on the {_ordinal(day)} of every month {at}" if day else expr
    return expr
