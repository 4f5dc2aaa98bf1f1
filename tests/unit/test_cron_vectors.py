"""Test vectors of robfig/cron, APScheduler (master and 3.x) and croniter, read by the engine.

The cases live in ``data/cron_vectors.txt`` (format in its header). Each expects the peer's answer,
except where SPEC §2's DST rule, POSIX's OR of restricted day fields, POSIX's list star or its N-N decides:
those name their ``rule`` and record the peer's answer beside the engine's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from engine.core import errors
from engine.core.cron import expression, timetable
from engine.core.schedule_spec import DstFold, DstGap

DATA = Path(__file__).parent / "data" / "cron_vectors.txt"
RULES = {"dst", "or", "star", "range"}


@dataclass(frozen=True)
class Case:
    line: int
    source: str
    expr: str
    zone: str
    after: str
    expected: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.line}:{self.source}"


def load() -> list[Case]:
    cases = []
    for number, text in enumerate(DATA.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip() or text.startswith("#"):
            continue
        source, expr, zone, after, expected, *extra = (part.strip() for part in text.split(" | "))
        options = dict(item.split("=", 1) for item in extra)
        cases.append(Case(number, source, expr, zone, after, expected, options))
    return cases


CASES = load()


def start(case: Case) -> datetime:
    at = datetime.fromisoformat(case.after)
    return at if at.tzinfo is not None else at.replace(tzinfo=expression.zone(case.zone))


def shown(fire: timetable.Fire) -> str:
    return fire.local.isoformat(timespec="minutes")


def expected_fires(case: Case) -> list[str]:
    if case.expected == "-":
        return []
    return [datetime.fromisoformat(item.strip()).isoformat(timespec="minutes") for item in case.expected.split(",")]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_vector(case: Case) -> None:
    gap = DstGap(case.options.get("gap", "shift"))
    fold = DstFold(case.options.get("fold", "first"))
    if case.expected.startswith("!"):
        with pytest.raises(errors.InvalidInput) as caught:
            timetable.preview(case.expr, case.zone, start(case), 1, dst_gap=gap, dst_fold=fold)
        assert case.expected[1:] in caught.value.message and "\n" not in caught.value.message
        return
    want = expected_fires(case)
    fires = timetable.preview(case.expr, case.zone, start(case), max(len(want), 1), dst_gap=gap, dst_fold=fold)
    assert [shown(fire) for fire in fires][:len(want) or 1] == want


def test_the_table_is_big_and_covers_what_the_issue_asks() -> None:
    assert len(CASES) >= 150
    peers = Counter(case.source.split()[0] for case in CASES)
    assert {"robfig", "aps4", "aps3", "croniter"} <= set(peers)
    zones = {case.zone for case in CASES}
    assert {"America/New_York", "Europe/London", "Europe/Berlin", "Australia/Sydney", "America/Sao_Paulo"} <= zones
    exprs = " ".join(case.expr for case in CASES)
    assert all(mark in exprs for mark in ("L", "W", "#", "?", "@"))
    refusals = " ".join(case.expected for case in CASES if case.expected.startswith("!"))
    for kind in ("seconds and years", "never fires", "must be", "step must be at least 1", "expected 5 fields",
                 "hashed and random", "not a valid cron expression", "'"):
        assert kind in refusals, kind


def test_every_difference_from_a_peer_names_its_rule_and_the_peer_answer() -> None:
    for case in CASES:
        rule = case.options.get("rule")
        assert rule is None or rule in RULES, case.id
        assert (rule is None) == ("peer" not in case.options), case.id
        assert set(case.options) <= {"rule", "peer", "gap", "fold"}, case.id
