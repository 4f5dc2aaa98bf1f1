"""Pure deciders of pruning: periods read from keys, which runs qualify, the summary ranges."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from engine.core import retention
from engine.core.models import RunStatus
from engine.core.retention import PruneCandidate


def test_period_dates_of_each_key_shape() -> None:
    assert retention.period_dates("2026-09-29", "UTC") == (date(2026, 9, 29), date(2026, 9, 29))
    assert retention.period_dates("2026-W53", "UTC") == (date(2026, 12, 28), date(2027, 1, 3))
    # A slot key is UTC; its business date is the schedule's local date.
    assert retention.period_dates("2026-09-29T19:30Z", "Asia/Seoul") == (date(2026, 9, 30), date(2026, 9, 30))
    with pytest.raises(ValueError):
        retention.period_dates("yesterday", "UTC")


def _run(i: int, key: str, status: RunStatus, slot: datetime) -> PruneCandidate:
    return PruneCandidate(i, 1, key, status, slot)


def test_decide_prune_keeps_unfinished_recent_and_not_yet_passed_runs() -> None:
    slot = datetime(2026, 3, 2, 9, tzinfo=UTC)
    cands = [
        _run(1, "2026-03-01", RunStatus.SUCCESS, slot),
        _run(2, "2026-03-01", RunStatus.RETRY_PENDING, slot),
        _run(3, "2026-03-01", RunStatus.MANUAL_REQUIRED, slot),
        _run(4, "2026-03-10", RunStatus.FAILED, slot + timedelta(days=9)),
        _run(5, "2026-W09", RunStatus.MISSED, slot),           # week of 2026-02-23..03-01
        _run(6, "2026-W10", RunStatus.SUCCESS, slot),          # 03-02..03-08: ends after the cutoff
        _run(7, "garbage", RunStatus.SUCCESS, slot),
    ]
    chosen = retention.decide_prune(cands, date(2026, 3, 5), timezones={1: "UTC"}, next_run_at={1: slot + timedelta(days=30)})
    assert [c.id for c in chosen] == [1, 5]
    # A slot the scheduler has not passed yet is never pruned (a tick could make it again).
    assert retention.decide_prune(cands[:1], date(2026, 3, 5), timezones={1: "UTC"}, next_run_at={1: slot}) == []


def test_summary_ranges_and_their_coverage() -> None:
    slot = datetime(2026, 3, 2, 9, tzinfo=UTC)
    ranges = retention.summarize([_run(1, "2026-03-01", RunStatus.SUCCESS, slot),
                                  _run(2, "2026-03-04", RunStatus.MISSED, slot)], {1: "UTC"})
    assert ranges == [retention.PrunedRange(1, date(2026, 3, 1), date(2026, 3, 4), {"MISSED": 1, "SUCCESS": 1})]
    again = retention.range_from_audit(1, {"first": "2026-03-01", "last": "2026-03-04", "counts": {}})
    assert again is not None and retention.is_pruned([again], date(2026, 3, 2), date(2026, 3, 2))
    assert not retention.is_pruned([again], date(2026, 3, 2), date(2026, 3, 8))
    assert retention.cutoff_for_retain(datetime(2026, 3, 21, 1, tzinfo=UTC), timedelta(days=10)) == date(2026, 3, 11)
