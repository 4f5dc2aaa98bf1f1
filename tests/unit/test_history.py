"""The calendar's pure part (why a period has no row) and the cron describer."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta

from engine.core.cron import words
from engine.core.models import PeriodKind, Run, RunStatus, RunTrigger
from engine.core.schedule_spec import Schedule, ScheduleSpec
from engine.read.calendar_view import AuditRange, CalendarRow, plan_cells

T0 = datetime(2026, 9, 20, 0, 0, tzinfo=UTC)
SPEC = ScheduleSpec(name="d", workflow="daily_report", project="p", cron="0 3 * * *", timezone="UTC")


def schedule(**changes: object) -> Schedule:
    values: dict[str, object] = dict(id=1, spec=SPEC, version=1, enabled=True, archived=False,
                                     next_run_at=T0 + timedelta(days=9, hours=3), created_at=T0)
    values.update(changes)
    return Schedule(**values)  # type: ignore[arg-type]


def run(key: str, status: RunStatus) -> Run:
    return Run(id=7, schedule_id=1, schedule_name="d", workflow="daily_report", project="p",
               trigger=RunTrigger.SCHEDULED, scheduled_for=T0, business_key=key, idempotency_key=key, revision=1,
               status=status, priority=20, not_before=None, pinned={}, attempt_count=1, max_attempts=3,
               next_attempt_trigger=None, reason="misfire" if status is RunStatus.MISSED else None,
               lease_owner=None, lease_until=None, fence=0, cancel_requested=False, max_runtime_s=60,
               created_at=T0, claimed_at=None, started_at=None, completed_at=None, error_code=None,
               error_message=None)


def slots(first: int, last: int) -> list[tuple[str, date, datetime]]:
    out = []
    for day in range(first, last + 1):
        d = date(2026, 9, day)
        out.append((d.isoformat(), d, datetime(2026, 9, day, 3, tzinfo=UTC) + timedelta(days=1)))
    return out


def test_every_period_without_a_row_says_why() -> None:
    now = datetime(2026, 9, 29, 12, 0, tzinfo=UTC)
    too_old = AuditRange(datetime(2026, 9, 20, tzinfo=UTC), datetime(2026, 9, 22, tzinfo=UTC), "TOO_OLD", 11,
                         "too_old")
    disabled = AuditRange(datetime(2026, 9, 22, tzinfo=UTC), datetime(2026, 9, 24, tzinfo=UTC), "DISABLED",
                          12, "disabled")
    runs = {"2026-09-24": run("2026-09-24", RunStatus.FAILED), "2026-09-25": run("2026-09-25", RunStatus.MISSED)}
    sched = schedule(created_at=datetime(2026, 9, 20, 1, tzinfo=UTC))
    cells = plan_cells(sched, PeriodKind.DAY, slots(18, 29), runs, [too_old, disabled], now)
    states = {c.key: c.state for c in cells}
    assert states["2026-09-18"] == "BEFORE_SCHEDULE"  # slot 09-19 03:00, before the schedule existed
    assert states["2026-09-19"] == "TOO_OLD" and states["2026-09-20"] == "TOO_OLD"
    assert states["2026-09-21"] == "DISABLED" and states["2026-09-22"] == "DISABLED"
    assert states["2026-09-24"] == "FAILED" and states["2026-09-25"] == "MISSED"
    assert states["2026-09-23"] == "NO_ROW"  # nothing explains it: shown, not hidden
    assert states["2026-09-28"] == "AWAITING_TICK"  # slot 09-29 03:00 passed, next_run_at not advanced
    assert states["2026-09-29"] == "NOT_YET_DUE"
    by_key = {c.key: c for c in cells}
    assert by_key["2026-09-19"].audit_id == 11 and by_key["2026-09-24"].run_id == 7
    row = CalendarRow(sched, PeriodKind.DAY, cells)
    # Backfill offers the row-less past periods and the MISSED one, never FAILED or future ones.
    assert row.backfill_ranges() == [(date(2026, 9, 18), date(2026, 9, 23), 6),
                                     (date(2026, 9, 25), date(2026, 9, 28), 4)]


def test_a_currently_disabled_schedule_explains_its_silence() -> None:
    now = datetime(2026, 9, 29, 12, 0, tzinfo=UTC)
    sched = schedule(enabled=False, disabled_at=datetime(2026, 9, 26, tzinfo=UTC), disabled_reason="repo move")
    cells = plan_cells(sched, PeriodKind.DAY, slots(26, 27), {}, [], now)
    assert [(c.state, c.reason) for c in cells] == [("DISABLED", "repo move"), ("DISABLED", "repo move")]


def test_common_crons_in_plain_words() -> None:
    assert words.describe("30 19 * * *") == "every day at 19:30"
    assert words.describe("0 9 * * 1-5") == "on weekdays at 09:00"
    assert words.describe("0 0 * * 1") == "every Monday at 00:00"
    assert words.describe("15 8 * * mon,wed") == "on Monday and Wednesday at 08:15"
    assert words.describe("*/15 * * * *") == "every 15 minutes"
    assert words.describe("5 * * * *") == "every hour at minute 5"
    assert words.describe("0 6 1 * *") == "on the 1st of every month at 06:00"
    assert words.describe("@daily") == "every day at 00:00"
    assert words.describe("0 0 L * *") == "0 0 L * *"  # unrecognised: the expression itself
    assert words.describe("0 9 * 1 *") == "0 9 * 1 *"


def test_a_pruned_period_says_so_and_backfill_leaves_it_alone() -> None:
    from engine.core.retention import PrunedRange

    now = datetime(2026, 9, 29, 12, 0, tzinfo=UTC)
    pruned = [PrunedRange(schedule_id=1, first=date(2026, 9, 20), last=date(2026, 9, 21))]
    cells = plan_cells(schedule(), PeriodKind.DAY, slots(20, 22), {}, [], now, pruned)
    assert [(c.key, c.state) for c in cells] == [("2026-09-20", "PRUNED"), ("2026-09-21", "PRUNED"),
                                                  ("2026-09-22", "NO_ROW")]
    assert [c.backfillable for c in cells] == [False, False, True]


def test_only_a_scheduled_run_has_a_start_delay() -> None:
    """A trigger or a backfill of an old day reports on that day; it did not start days late."""
    started = T0 + timedelta(days=65, minutes=3)
    scheduled = dataclasses.replace(run("2026-09-28", RunStatus.SUCCESS), started_at=started)
    assert scheduled.start_delay == timedelta(days=65, minutes=3)
    for trigger in (RunTrigger.MANUAL, RunTrigger.BACKFILL):
        assert dataclasses.replace(scheduled, trigger=trigger).start_delay is None
    assert dataclasses.replace(scheduled, started_at=None).start_delay is None
