"""A small deterministic grammar: a schedule from an English or Korean sentence (SPEC §16.2).

``parse(text, projects=..., project=..., workflow=...)`` understands the
common phrasings and nothing else:

- days: ``every day`` / ``daily`` / ``매일``; ``every weekday`` / ``on weekdays`` /
  ``평일``; ``every Monday`` / ``on Mondays`` / ``매주 월요일`` (any day of the week);
- time: ``at 18:30``, ``at 6 pm``, ``at 6:30pm``, ``18시 30분``, ``오후 6시 30분``,
  ``오전 9시``, ``오후 6시 반``;
- zone: an IANA name (``Asia/Seoul``), ``UTC``, ``KST``, or a city (``Seoul time``,
  ``서울``); Korean text without one is ``Asia/Seoul``, English text ``UTC``;
- what: ``daily report`` / ``일일 보고`` → ``daily_report``, ``weekly report`` /
  ``주간 보고`` → ``weekly_report`` (else weekly for one day of the week, daily
  otherwise); ``for web`` / ``web 프로젝트`` names the project.

Anything else raises ``NotUnderstood``: that needs a model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ENGLISH_DAYS = {"monday": 1, "tuesday": 2, "wednesday": 3, "thursday": 4, "friday": 5,
                "saturday": 6, "sunday": 0}
KOREAN_DAYS = {"월": 1, "화": 2, "수": 3, "목": 4, "금": 5, "토": 6, "일": 0}
CITIES = {"seoul": "Asia/Seoul", "서울": "Asia/Seoul", "한국": "Asia/Seoul", "kst": "Asia/Seoul",
          "korea": "Asia/Seoul", "tokyo": "Asia/Tokyo", "도쿄": "Asia/Tokyo", "jst": "Asia/Tokyo",
          "london": "Europe/London", "런던": "Europe/London", "berlin": "Europe/Berlin",
          "paris": "Europe/Paris", "new york": "America/New_York", "뉴욕": "America/New_York",
          "los angeles": "America/Los_Angeles", "san francisco": "America/Los_Angeles",
          "utc": "UTC", "gmt": "UTC"}
_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_IANA = re.compile(r"\b([A-Z][A-Za-z_]+/[A-Z][A-Za-z_]+(?:/[A-Z][A-Za-z_]+)?)\b")


class NotUnderstood(ValueError):
    """The sentence is outside the grammar."""


@dataclass(frozen=True)
class Parsed:
    """A ``[[schedules]]`` entry and how the sentence was read."""

    entry: dict[str, Any]
    rationale: str


def _days(text: str) -> tuple[str, str] | None:
    """``(day-of-week field, words)`` of the sentence, or None."""
    lower = text.lower()
    if re.search(r"\b(every\s+weekday|weekdays|on\s+weekdays|monday\s+to\s+friday)\b", lower) \
            or "평일" in text:
        return "1-5", "on weekdays"
    match = re.search(r"\b(?:every|on|each)\s+(monday|tuesday|wednesday|thursday|friday|saturday|"
                      r"sunday)s?\b", lower)
    if match:
        return str(ENGLISH_DAYS[match.group(1)]), f"every {match.group(1).title()}"
    match = re.search(r"매주\s*([월화수목금토일])요일", text) or re.search(r"([월화수목금토일])요일마다", text)
    if match:
        return str(KOREAN_DAYS[match.group(1)]), f"every {match.group(1)}요일"
    if re.search(r"\b(every\s+day|daily|each\s+day)\b", lower) or "매일" in text:
        return "*", "every day"
    return None


def _time(text: str) -> tuple[int, int] | None:
    """``(hour, minute)`` named by the sentence, or None."""
    lower = text.lower()
    match = re.search(r"\bat\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?(?![\d:])", lower)
    if match:
        hour, minute = int(match.group(1)), int(match.group(2) or 0)
        half = match.group(3)
        if half is None and match.group(2) is None:
            raise NotUnderstood(f"'at {match.group(1)}' names no minute or am/pm: write "
                                f"'at {match.group(1)}:00' or 'at {match.group(1)} pm'")
        return _clock(hour, minute, half[0] if half else None)
    match = re.search(r"(오전|오후|저녁|아침|밤)?\s*(\d{1,2})\s*시\s*(?:(\d{1,2})\s*분|(반))?", text)
    if match:
        hour = int(match.group(2))
        minute = int(match.group(3)) if match.group(3) else 30 if match.group(4) else 0
        half = {"오전": "a", "아침": "a", "오후": "p", "저녁": "p", "밤": "p"}.get(match.group(1) or "")
        return _clock(hour, minute, half)
    match = re.search(r"(?<![\d:])(\d{1,2}):(\d{2})(?![\d:])", text)
    if match:
        return _clock(int(match.group(1)), int(match.group(2)), None)
    return None


def _clock(hour: int, minute: int, half: str | None) -> tuple[int, int]:
    if half is not None:
        if not 1 <= hour <= 12:
            raise NotUnderstood(f"{hour} is not an hour of a 12-hour clock")
        hour = hour % 12 + (12 if half == "p" else 0)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        raise NotUnderstood(f"{hour}:{minute:02d} is not a time of day")
    return hour, minute


def _zone(text: str, korean: bool, default: str | None = None) -> tuple[str, str]:
    """``(IANA name, how it was found)``."""
    match = _IANA.search(text)
    if match:
        return match.group(1), match.group(1)
    lower = text.lower()
    for word, name in sorted(CITIES.items(), key=lambda item: -len(item[0])):
        if re.search(rf"(?<![a-z]){re.escape(word)}(?![a-z])", lower):
            return name, f"{word} → {name}"
    if default:
        return default, f"no zone named → the config's {default}"
    if korean:
        return "Asia/Seoul", "no zone named; Korean text → Asia/Seoul"
    return "UTC", "no zone named → UTC"


def _workflow(text: str, dow: str, workflow: str | None) -> str:
    lower = text.lower()
    if workflow:
        return workflow
    if "weekly" in lower or "주간" in text:
        return "weekly_report"
    if "daily" in lower or "일일" in text or "일간" in text:
        return "daily_report"
    return "weekly_report" if dow.isdigit() else "daily_report"


def _project(text: str, projects: Sequence[str], project: str | None) -> str:
    if project:
        return project
    named = [p for p in projects if re.search(rf"(?:\bfor\s+|\bof\s+){re.escape(p)}\b", text)]
    # Korean puts the project first: "web 프로젝트", "api 일일 보고"; any word that is a key.
    named = named or [p for p in projects if re.search(rf"(?<![\w/-]){re.escape(p)}(?![\w/-])", text)]
    if len(named) == 1:
        return named[0]
    if len(projects) == 1:
        return projects[0]
    raise NotUnderstood("the sentence names no configured project (known: "
                        f"{', '.join(projects) or 'none'}); pass --project")


#: What a drafted report schedule holds, whatever its days: each report runs from the previous
#: slot to its own and places commits by landing, so "weekdays at 6:30pm" still reports the weekend
#: (in Monday's report) and "every Friday at 17:00" the week up to that Friday.
LOSSLESS = {"report_on": "interval", "attribution": "landed"}


def parse(text: str, *, projects: Sequence[str], project: str | None = None,
          workflow: str | None = None, timezone: str | None = None) -> Parsed:
    """The schedule the sentence describes; ``NotUnderstood`` outside the grammar.

    ``timezone``: the zone of a sentence that names none (the config's); else UTC, or Asia/Seoul
    for a Korean sentence.
    """
    days = _days(text)
    at = _time(text)
    if days is None or at is None:
        missing = " and ".join(w for w, v in (("days", days), ("time of day", at)) if v is None)
        raise NotUnderstood(f"the builtin grammar finds no {missing} in {text!r}; it knows 'every "
                            "day / weekdays / every Monday at HH:MM' and '매일 / 평일 / 매주 월요일 "
                            "오전·오후 N시 M분'; anything else needs a model ([llm] provider = "
                            "\"ollama\")")
    dow, day_words = days
    hour, minute = at
    korean = bool(_HANGUL.search(text))
    zone, zone_words = _zone(text, korean, timezone)
    flow = _workflow(text, dow, workflow)
    key = _project(text, projects, project)
    entry = {"name": f"{key}-{flow.removesuffix('_report')}", "workflow": flow, "project": key,
             "cron": f"{minute} {hour} * * {dow}", "timezone": zone, **LOSSLESS}
    rationale = (f"{day_words} at {hour:02d}:{minute:02d}, {zone_words}; "
                 f"{flow} for {key}, each report from the previous slot to its own")
    return Parsed(entry, rationale)
