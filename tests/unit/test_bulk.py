"""Which runs a bulk action acts on (``core.bulk``): the latest revision of each period, in the statuses asked
for, whose period meets the date range."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from engine.core import bulk, errors
from engine.core.models import Run, RunStatus, RunTrigger

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)


def run(run_id: int, key: str, status: RunStatus, *, revision: int = 1, day: int = 0) -> Run:
    return Run(id=run_id, schedule_id=1, schedule_name="d", workflow="daily_report", project="p",
               trigger=RunTrigger.SCHEDULED, scheduled_for=T0 + timedelta(days=day), business_key=key,
               idempotency_key=f"daily_report:p:{key}" + (f"#{revision}" if revision > 1 else ""),
               revision=revision, status=status, priority=20, not_before=None, pinned={}, attempt_count=1,
               max_attempts=3, next_attempt_trigger=None, reason=None, lease_owner=None, lease_until=None, fence=0,
               cancel_requested=False, max_runtime_s=60, created_at=T0, claimed_at=None, started_at=None,
               completed_at=None, error_code="NOTION_UNAUTHORIZED" if status is RunStatus.PARTIAL_SUCCESS else None,
               error_message=None)


FAILED_ONES = (RunStatus.FAILED, RunStatus.PARTIAL_SUCCESS)


def test_only_the_latest_revision_of_a_period_is_chosen() -> None:
    candidates = [run(1, "2026-09-01", RunStatus.FAILED),
                  run(2, "2026-09-01", RunStatus.SUCCESS, revision=2),  # --force-new made r2: r1 is history
                  run(3, "2026-09-02", RunStatus.SUCCESS),
                  run(4, "2026-09-02", RunStatus.PARTIAL_SUCCESS, revision=2, day=1),
                  run(5, "2026-09-03", RunStatus.FAILED, day=2)]
    chosen = bulk.choose(candidates, statuses=FAILED_ONES, timezone="UTC", first=None, last=None)
    assert [r.id for r in chosen] == [4, 5]


def test_the_range_takes_every_period_that_shares_a_business_date_with_it() -> None:
    days = [run(i, f"2026-09-0{i}", RunStatus.FAILED, day=i) for i in range(1, 8)]
    week = run(20, "2026-W36", RunStatus.FAILED, day=9)  # Monday 2026-08-31 .. Sunday 2026-09-06
    slot = run(21, "2026-09-08T23:30Z", RunStatus.FAILED, day=10)  # 2026-09-09 in Seoul
    pick = [*days, week, slot]

    def ids(first: date | None, last: date | None, tz: str = "UTC") -> list[int]:
        return [r.id for r in bulk.choose(pick, statuses=FAILED_ONES, timezone=tz, first=first, last=last)]

    assert ids(date(2026, 9, 3), date(2026, 9, 4)) == [3, 4, 20]
    assert ids(date(2026, 9, 6), None) == [6, 7, 20, 21]
    assert ids(None, date(2026, 9, 1)) == [1, 20]
    assert ids(date(2026, 9, 9), date(2026, 9, 9), "Asia/Seoul") == [21]
    assert ids(date(2026, 9, 9), date(2026, 9, 9)) == []


def test_statuses_are_parsed_from_commas_and_repeats_and_refused_outside_the_allowed_ones() -> None:
    assert bulk.parse_statuses(["failed,PARTIAL_SUCCESS", "FAILED"], bulk.RETRYABLE) == FAILED_ONES
    assert bulk.parse_statuses([], bulk.RETRYABLE) == ()
    with pytest.raises(errors.InvalidInput, match="'SUCCESS'"):
        bulk.parse_statuses(["FAILED,SUCCESS"], bulk.RETRYABLE)
    with pytest.raises(errors.InvalidInput, match="--to 2026-09-01 is before --from 2026-09-02"):
        bulk.check_range(date(2026, 9, 2), date(2026, 9, 1))


def test_a_plan_says_what_it_selects() -> None:
    plan = bulk.BulkPlan("retry", "web-daily", ("FAILED", "PARTIAL_SUCCESS"), date(2026, 9, 1), None, ())
    assert plan.describe() == "FAILED, PARTIAL_SUCCESS runs of web-daily from 2026-09-01"


def test_a_selection_is_one_compact_form_value() -> None:
    """Security round 3, item 6: a form field per run failed above 1,000 fields while the preview offered 3,000."""
    from engine.core import errors

    ids = [*range(5, 3005), 4000, 4002, 4003]
    text = bulk.encode_selection(ids)
    assert text == "5-3004,4000,4002-4003" and bulk.decode_selection(text) == set(ids)
    assert bulk.decode_selection("") == set()
    for bad in ("7-3", "1-999999999", "x", "1,,2", "-5", "0-3"):
        with pytest.raises(errors.InvalidInput):
            bulk.decode_selection(bad)
