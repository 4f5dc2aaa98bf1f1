"""The ops report's narrative from a model, grounded in the facts (SPEC §16.3).

The model answers in structured output (``format`` = ``{"summary": str}``) and
the summary is checked like §16.1: it may cite only run ids (``run 12``,
``#12``), error codes (``UPPER_CASE`` words with an underscore) and schedules
(in backticks) that are in the facts, and from text rules 2 on it links
nowhere (the engine's report has no forge) and loses control and bidi
characters. One repair request lists what was wrong; if the second answer
fails too, the deterministic summary is used. ``check`` is pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import pydantic

from engine.core import redact
from steps import grounding, untrusted

_RUN = re.compile(r"(?:\bruns?\s+|#)(\d+)\b", re.IGNORECASE)
_RUN_LIST = re.compile(r"\bruns\s+((?:\d+\s*(?:,|and)\s*)+\d+)", re.IGNORECASE)
_CODE = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_TICKED = re.compile(r"`([^`\n]+)`")
STATUSES = {"PARTIAL_SUCCESS", "RETRY_PENDING", "MANUAL_REQUIRED"}

SYSTEM = ("You summarise a job scheduler's operations facts for its operators in three to five "
          "sentences of plain English. Use only the facts given; cite runs as 'run N', error codes "
          "exactly as given, schedules in backticks. Answer with JSON matching the schema.")


class ModelSummary(pydantic.BaseModel):
    """What the model must answer."""

    summary: str


def known(facts: Mapping[str, Any]) -> tuple[set[int], set[str], set[str]]:
    """Run ids, error codes and schedule names the facts contain."""
    run_ids = {int(r) for group in facts["failures"] for r in group["runs"]}
    run_ids |= {int(s["run"]) for s in [*facts["stalled"], *facts.get("stuck", []), *facts.get("upstream_waits", [])]}
    run_ids |= {int(r) for r in facts["backfills"]}
    codes = {str(g["error_code"]) for g in facts["failures"]}
    names = {str(s["schedule"]) for s in facts["schedules"]}
    names |= {str(c["schedule"]) for c in facts.get("changes", [])}
    return run_ids, codes, names


def check(text: str, facts: Mapping[str, Any], *, links: bool = False) -> tuple[grounding.Violation, ...]:
    """What ``text`` cites that the facts do not hold; with ``links``, every link it makes too."""
    run_ids, codes, names = known(facts)
    found: list[grounding.Violation] = grounding.link_violations(None, text, None) if links else []
    cited = {int(n) for n in _RUN.findall(text)}
    for listed in _RUN_LIST.findall(text):
        cited |= {int(n) for n in re.findall(r"\d+", listed)}
    for number in sorted(cited - run_ids):
        found.append(grounding.Violation("unknown_fact", None,
                                         f"cites run {number}, which is not in the facts"))
    for code in sorted(set(_CODE.findall(text)) - codes - STATUSES):
        found.append(grounding.Violation("unknown_fact", None,
                                         f"cites error code {code}, which is not in the facts"))
    for name in sorted({n.strip() for n in _TICKED.findall(text)} - names - codes):
        found.append(grounding.Violation("unknown_fact", None,
                                         f"cites schedule `{name}`, which is not in the facts"))
    if not text.strip():
        found.append(grounding.Violation("missing_section", None, "is empty"))
    return tuple(found)


def builtin_summary(facts: Mapping[str, Any]) -> str:
    """The deterministic summary: totals, failures by code, stuck and stalled runs."""
    total = sum(s["runs"] for s in facts["schedules"])
    failed = sum(g["count"] for g in facts["failures"])
    parts = [f"{total} run(s) of {len(facts['schedules'])} schedule(s) had a slot in this period; "
             f"{failed} failed or were partial."]
    parts += [f"`{g['schedule']}` had {g['count']} {g['error_code']} from {g['first']} to {g['last']}."
              for g in facts["failures"]]
    if facts.get("stuck"):
        parts.append(f"{len(facts['stuck'])} run(s) are stuck.")
    if facts["stalled"]:
        parts.append(f"{len(facts['stalled'])} run(s) are stalled.")
    return " ".join(parts)


def prompt(facts: Mapping[str, Any]) -> str:
    """The user prompt: the facts as JSON."""
    return "Facts (JSON):\n" + json.dumps(facts, sort_keys=True, ensure_ascii=False)


def write(facts: Mapping[str, Any], ask: Callable[[list[dict[str, str]]], str],
          rules: int = 0) -> grounding.Grounded:
    """The grounded summary; ``ask(messages)`` returns the model's JSON answer. ``rules``: the run's
    text rules (from 2 on the summary is cleaned and a link in it is a violation)."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt(facts)}]
    links = rules >= untrusted.LINK_RULES

    def parse(answer: str) -> str:
        try:
            summary = ModelSummary.model_validate(json.loads(answer)).summary.strip()
        except (ValueError, pydantic.ValidationError):
            return ""
        return redact.neutralise(summary, keep_newlines=True) if links else summary

    first_answer = ask(messages)
    first = parse(first_answer)
    first_problems = check(first, facts, links=links)
    if not first_problems:
        return grounding.Grounded(first, "ok")
    repair = ("Your summary does not pass the checks:\n"
              + "\n".join(f"- {v.line()}" for v in first_problems)
              + "\nWrite it again citing only runs, error codes and schedules in the facts.")
    second = parse(ask([*messages, {"role": "assistant", "content": first_answer},
                        {"role": "user", "content": repair}]))
    second_problems = check(second, facts, links=links)
    if not second_problems:
        return grounding.Grounded(second, "repaired", first_problems)
    return grounding.Grounded(builtin_summary(facts), "fallback", first_problems + second_problems,
                              ("Summary",))
