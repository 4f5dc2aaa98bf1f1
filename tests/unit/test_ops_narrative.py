"""The ops summary's check (SPEC §16.3): only run ids, error codes and schedules in the facts."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from steps import ops_narrative

FACTS = {"start": "s", "end": "e", "as_of": "a",
         "schedules": [{"schedule": "web-daily", "runs": 3}],
         "failures": [{"schedule": "web-daily", "error_code": "MODEL_UNAVAILABLE", "count": 2,
                       "first": "2026-09-28", "last": "2026-09-29", "runs": [7, 9]}],
         "stalled": [], "backfills": [11], "unrun": [], "changes": []}


def test_what_the_facts_hold_passes_and_nothing_else() -> None:
    ok = "Runs 7 and 9 of `web-daily` failed with MODEL_UNAVAILABLE; run 11 was a backfill."
    assert ops_narrative.check(ok, FACTS) == ()
    lines = [v.line() for v in ops_narrative.check(
        "Run 8 failed with NOTION_DOWN in `api-daily`; #12 too; PARTIAL_SUCCESS is fine.", FACTS)]
    assert lines == ["cites run 8, which is not in the facts", "cites run 12, which is not in the facts",
                     "cites error code NOTION_DOWN, which is not in the facts",
                     "cites schedule `api-daily`, which is not in the facts"]


@given(st.integers(min_value=0, max_value=10**6))
def test_a_run_id_outside_the_facts_is_caught(number: int) -> None:
    found = ops_narrative.check(f"run {number} failed", FACTS)
    assert bool(found) == (number not in (7, 9, 11))


def test_two_failures_fall_back_to_the_deterministic_summary() -> None:
    answers = iter([json.dumps({"summary": "run 1 broke"}), "not json"])
    out = ops_narrative.write(FACTS, lambda messages: next(answers))
    assert out.verdict == "fallback" and out.text == ops_narrative.builtin_summary(FACTS)
    assert ops_narrative.check(out.text, FACTS) == ()


def test_stuck_runs_are_facts_a_summary_may_cite_and_the_fallback_counts() -> None:
    facts = {**FACTS, "stuck": [{"run": 21, "schedule": "web-daily", "status": "QUEUED",
                                 "since": "2026-10-04T12:00:00Z", "reason": "schedule disabled"}]}
    assert ops_narrative.check("Run 21 of `web-daily` is stuck.", facts) == ()
    assert ops_narrative.check("Run 21 of `web-daily` is stuck.", FACTS) != ()  # facts read before stuck runs
    assert "1 run(s) are stuck." in ops_narrative.builtin_summary(facts)
    assert "stuck" not in ops_narrative.builtin_summary(FACTS)


def test_a_link_in_the_ops_summary_is_a_violation_from_text_rules_2() -> None:
    """Issue 36: the engine's own report has no forge, so no link in the model's summary holds."""
    phish = "Run 7 failed. [Re-authenticate](https://evil.example/phish) \x1b]0;T\x07\u202e"
    answers = iter([json.dumps({"summary": phish})] * 2)
    out = ops_narrative.write(FACTS, lambda messages: next(answers), rules=2)
    assert out.verdict == "fallback" and [v.kind for v in out.violations] == ["foreign_link"] * 2
    assert ops_narrative.check(phish, FACTS) == ()  # runs pinned before the rules: as before
    answers = iter([json.dumps({"summary": "Run 7 failed.\x1b]0;T\x07\u202e"})])
    clean = ops_narrative.write(FACTS, lambda messages: next(answers), rules=2)
    assert clean.verdict == "ok" and clean.text == "Run 7 failed.]0;T"
