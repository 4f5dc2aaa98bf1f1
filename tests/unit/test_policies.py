"""Pure deciders: misfire, overlap, periods, retry backoff, in-step retry waits (no database, no clock)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core import errors, policies
from engine.core.cron import timetable, validate
from engine.core.models import PeriodKind, RunStatus, SlotReason
from engine.core.schedule_spec import Misfire, Overlap, ReportOn, Schedule, ScheduleSpec
from engine.scheduling import new_runs


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 9, 29, hour, minute, tzinfo=UTC)


HOURLY = [at(h) for h in (10, 11, 12, 13, 14)]


def statuses(planned: list[policies.PlannedSlot]) -> list[str]:
    return [p.status.value for p in planned]


# --- the spec's worked cases: hourly, grace 10m, next_run_at 10:00 -----------

@pytest.mark.parametrize(("policy", "now", "expected"), [
    (Misfire.SKIP, at(14, 5), ["MISSED"] * 4 + ["QUEUED"]),
    (Misfire.RUN_ONCE, at(14, 5), ["MISSED"] * 4 + ["QUEUED"]),
    (Misfire.CATCH_UP_ALL, at(14, 5), ["QUEUED"] * 5),
    (Misfire.MANUAL, at(14, 5), ["MANUAL_REQUIRED"] * 4 + ["QUEUED"]),
    (Misfire.RUN_ONCE, at(14, 15), ["MISSED"] * 4 + ["QUEUED"]),
    (Misfire.MANUAL, at(14, 15), ["MANUAL_REQUIRED"] * 5),
    (Misfire.SKIP, at(14, 15), ["MISSED"] * 5),
    (Misfire.CATCH_UP_ALL, at(14, 15), ["QUEUED"] * 5),
])
def test_worked_misfire_cases(policy: Misfire, now: datetime, expected: list[str]) -> None:
    planned = policies.decide_misfire(HOURLY, now, timedelta(minutes=10), policy)
    assert [p.slot_at for p in planned] == HOURLY
    assert statuses(planned) == expected
    assert all(p.reason is SlotReason.MISFIRE for p in planned if p.status is not RunStatus.QUEUED)


def hourly_schedule(misfire: Misfire, next_run_at: datetime, **kw: object) -> Schedule:
    spec = ScheduleSpec(name="s", workflow="echo", project="p", cron="0 * * * *", timezone="Asia/Seoul",
                        misfire=misfire, **kw)  # type: ignore[arg-type]
    return Schedule(id=1, spec=spec, version=1, enabled=True, archived=False, next_run_at=next_run_at)


def test_plan_tick_enumerates_from_next_run_at_and_advances() -> None:
    plan = policies.plan_tick(hourly_schedule(Misfire.SKIP, at(10)), at(14, 5))
    assert plan is not None
    assert [p.slot_at for p in plan.slots] == HOURLY
    assert plan.next_run_at == at(15)
    assert plan.too_old is None


def test_plan_tick_nothing_due() -> None:
    assert policies.plan_tick(hourly_schedule(Misfire.SKIP, at(15)), at(14, 5)) is None


def test_plan_tick_year_of_downtime_is_bounded_by_the_window() -> None:
    schedule = hourly_schedule(Misfire.CATCH_UP_ALL, at(10) - timedelta(days=365))
    plan = policies.plan_tick(schedule, at(10, 30))
    assert plan is not None
    assert len(plan.slots) == 7 * 24  # the slots in [now - 7d, now]
    assert plan.too_old is not None
    assert plan.too_old.estimated_slots == pytest.approx(358 * 24, rel=0.02)
    assert plan.slots[0].slot_at >= at(10, 30) - timedelta(days=7)


# --- overlap -----------------------------------------------------------------

@pytest.mark.parametrize(("policy", "active", "expected"), [
    (Overlap.ALLOW, 1, ["QUEUED", "QUEUED", "QUEUED"]),
    (Overlap.SKIP_NEW, 1, ["SKIPPED", "SKIPPED", "SKIPPED"]),
    (Overlap.SKIP_NEW, 0, ["QUEUED", "SKIPPED", "SKIPPED"]),
    (Overlap.QUEUE_NEW, 0, ["QUEUED", "PENDING", "PENDING"]),
    (Overlap.QUEUE_NEW, 1, ["PENDING", "PENDING", "PENDING"]),
    (Overlap.BUFFER_ONE, 0, ["QUEUED", "PENDING", "SKIPPED"]),
    (Overlap.BUFFER_ONE, 1, ["PENDING", "SKIPPED", "SKIPPED"]),
])
def test_overlap_counts_runs_created_earlier_in_the_same_tick(policy: Overlap, active: int,
                                                             expected: list[str]) -> None:
    state = policies.OverlapState(active=active, pending=0)
    got = [policies.decide_overlap(RunStatus.QUEUED, policy, state) for _ in range(3)]
    assert [s.value for s, _ in got] == expected
    assert all(reason is SlotReason.OVERLAP for s, reason in got if s is RunStatus.SKIPPED)


def test_overlap_leaves_unrun_slots_alone() -> None:
    state = policies.OverlapState(active=1, pending=1)
    assert policies.decide_overlap(RunStatus.MISSED, Overlap.SKIP_NEW, state) == (RunStatus.MISSED, None)
    assert state == policies.OverlapState(1, 1)


def test_buffer_one_with_an_existing_pending_skips() -> None:
    state = policies.OverlapState(active=2, pending=1)
    assert policies.decide_overlap(RunStatus.QUEUED, Overlap.BUFFER_ONE, state)[0] is RunStatus.SKIPPED


# --- business periods -----------------------------------------------------------

def test_daily_previous_reports_on_yesterday_local() -> None:
    slot = datetime(2026, 9, 29, 18, 0, tzinfo=UTC)  # 03:00 on the 30th in Seoul
    period = policies.business_period(PeriodKind.DAY, slot, "Asia/Seoul", ReportOn.PREVIOUS)
    assert period.key == "2026-09-29"
    assert period.start_at == datetime(2026, 9, 28, 15, 0, tzinfo=UTC)
    assert period.end_at == datetime(2026, 9, 29, 15, 0, tzinfo=UTC)


def test_daily_current_reports_on_the_slot_day() -> None:
    slot = datetime(2026, 9, 29, 10, 30, tzinfo=UTC)  # 19:30 Seoul
    assert policies.business_period(PeriodKind.DAY, slot, "Asia/Seoul", ReportOn.CURRENT).key == "2026-09-29"


def test_weekly_period_is_iso_week_monday_to_monday_local() -> None:
    slot = datetime(2027, 1, 4, 0, 0, tzinfo=UTC)  # Monday 09:00 Seoul, ISO 2027-W01
    period = policies.business_period(PeriodKind.WEEK, slot, "Asia/Seoul", ReportOn.PREVIOUS)
    assert period.key == "2026-W53"
    assert period.start_at == datetime(2026, 12, 27, 15, 0, tzinfo=UTC)  # Mon 2026-12-28 00:00 KST
    assert period.end_at - period.start_at == timedelta(days=7)


def test_week_spanning_dst_is_still_monday_to_monday_local() -> None:
    period = policies.period_of_date(PeriodKind.WEEK, date(2026, 11, 4), "America/New_York")
    assert period.key == "2026-W45"
    assert period.start_at == datetime(2026, 11, 2, 5, 0, tzinfo=UTC)
    assert period.end_at == datetime(2026, 11, 9, 5, 0, tzinfo=UTC)
    period = policies.period_of_date(PeriodKind.WEEK, date(2026, 10, 29), "America/New_York")
    assert period.end_at - period.start_at == timedelta(days=7, hours=1)  # the week that falls back


def test_slot_period_is_keyed_by_the_fire() -> None:
    period = policies.business_period(PeriodKind.SLOT, at(14, 30), "Asia/Seoul", ReportOn.PREVIOUS)
    assert period.key == "2026-09-29T14:30Z"


def test_slot_dates_for_a_business_date() -> None:
    assert policies.slot_dates_for_period(PeriodKind.DAY, date(2026, 9, 29), ReportOn.PREVIOUS) == (
        date(2026, 9, 30), date(2026, 9, 30))
    assert policies.slot_dates_for_period(PeriodKind.WEEK, date(2026, 10, 1), ReportOn.CURRENT) == (
        date(2026, 9, 28), date(2026, 10, 4))


def test_idempotency_keys() -> None:
    assert policies.idempotency_key("daily_report", "platform", "2026-09-29") == "daily_report:platform:2026-09-29"
    assert policies.idempotency_key("weekly_report", "platform", "2026-W40", 3) == "weekly_report:platform:2026-W40#3"


# --- retries -------------------------------------------------------------------

def test_retry_backoff_grows_fourfold_then_fails() -> None:
    now = at(12)
    delays = []
    for used in (1, 2):
        decision = policies.decide_run_retry(attempts_used=used, max_attempts=3, backoff=timedelta(minutes=1), now=now,
                                         retryable=True)
        assert decision.retry and decision.not_before is not None
        delays.append(decision.not_before - now)
    assert delays == [timedelta(minutes=1), timedelta(minutes=4)]
    assert not policies.decide_run_retry(attempts_used=3, max_attempts=3, backoff=timedelta(minutes=1), now=now,
                                     retryable=True).retry


def test_permanent_errors_never_retry_and_retry_after_is_a_floor() -> None:
    now = at(12)
    assert not policies.decide_run_retry(attempts_used=1, max_attempts=3, backoff=timedelta(minutes=1), now=now,
                                     retryable=False).retry
    decision = policies.decide_run_retry(attempts_used=1, max_attempts=3, backoff=timedelta(minutes=1), now=now,
                                     retryable=True, retry_after=timedelta(minutes=10))
    assert decision.not_before == now + timedelta(minutes=10)


# --- in-step retry waits -------------------------------------------------------

def test_an_in_step_retry_waits_its_backoff_while_it_fits_in_the_budget() -> None:
    decide = policies.decide_call_retry
    assert decide(attempts=1, max_attempts=None, left_s=30.0, backoff_s=1.4) == policies.RetryWait(1.4)
    assert decide(attempts=3, max_attempts=8, left_s=4.0, backoff_s=4.0).wait_s == 4.0  # exactly what is left
    assert decide(attempts=1, max_attempts=None, left_s=30.0, backoff_s=-1.0).wait_s == 0.0


def test_an_in_step_retry_stops_at_max_attempts_a_spent_budget_or_a_wait_that_does_not_fit() -> None:
    decide = policies.decide_call_retry
    assert decide(attempts=8, max_attempts=8, left_s=30.0, backoff_s=1.0).stop
    assert not decide(attempts=7, max_attempts=8, left_s=30.0, backoff_s=1.0).stop
    assert decide(attempts=1, max_attempts=None, left_s=0.0, backoff_s=0.0).stop
    assert decide(attempts=1, max_attempts=None, left_s=0.0, backoff_s=0.0, retry_after_s=0.0).stop
    # A wait is taken whole or not at all: the budget is never overspent, and the waits keep growing.
    assert decide(attempts=5, max_attempts=None, left_s=2.5, backoff_s=10.3) == policies.RetryWait(None)


def test_an_in_step_retry_honours_retry_after_unless_it_is_longer_than_the_budget_left() -> None:
    decide = policies.decide_call_retry
    assert decide(attempts=1, max_attempts=10, left_s=30.0, backoff_s=0.7, retry_after_s=2.0).wait_s == 2.0
    assert decide(attempts=1, max_attempts=10, left_s=30.0, backoff_s=5.0, retry_after_s=0.5).wait_s == 0.5
    # Longer than what is left: the error goes up and its Retry-After becomes the run's not_before.
    assert decide(attempts=1, max_attempts=10, left_s=30.0, backoff_s=0.7, retry_after_s=120.0).stop
    assert decide(attempts=10, max_attempts=10, left_s=30.0, backoff_s=0.7, retry_after_s=1.0).stop


@given(st.integers(1, 20), st.floats(0, 60), st.floats(0, 60), st.one_of(st.none(), st.floats(0, 600)))
def test_an_in_step_retry_never_waits_past_the_budget(attempts: int, left_s: float, backoff_s: float,
                                                      retry_after_s: float | None) -> None:
    decision = policies.decide_call_retry(attempts=attempts, max_attempts=None, left_s=left_s, backoff_s=backoff_s,
                                          retry_after_s=retry_after_s)
    assert decision.stop or 0.0 <= (decision.wait_s or 0.0) <= left_s


def test_jitter_is_deterministic_and_below_the_bound() -> None:
    first = policies.jitter_delay(7, at(10), timedelta(minutes=5))
    assert first == policies.jitter_delay(7, at(10), timedelta(minutes=5))
    assert timedelta(0) <= first < timedelta(minutes=5)


# --- property: every slot in the window is accounted for exactly once ------

ZONES = ["Asia/Seoul", "America/New_York", "Europe/London", "Australia/Sydney", "UTC"]
CRONS = ["0 * * * *", "*/15 * * * *", "30 2 * * *", "0 9 * * 1", "45 23 * * *"]


@settings(max_examples=150, deadline=None)
@given(zone=st.sampled_from(ZONES), cron_expr=st.sampled_from(CRONS), misfire=st.sampled_from(list(Misfire)),
       overlap=st.sampled_from(list(Overlap)), downtime_h=st.integers(0, 24 * 40),
       start=st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2026, 12, 1)),
       active=st.integers(0, 2))
def test_every_slot_is_accounted_for_exactly_once(zone: str, cron_expr: str, misfire: Misfire, overlap: Overlap,
                                                  downtime_h: int, start: datetime, active: int) -> None:
    first = timetable.next_fire_after(cron_expr, zone, start.replace(tzinfo=UTC)).at
    schedule = Schedule(id=1, spec=ScheduleSpec(name="s", workflow="echo", project="p", cron=cron_expr,
                                                timezone=zone, misfire=misfire, overlap=overlap),
                        version=1, enabled=True, archived=False, next_run_at=first)
    now = first + timedelta(hours=downtime_h, minutes=3)
    plan = policies.plan_tick(schedule, now)
    assert plan is not None
    every = [f.at for f in timetable.fires_between(cron_expr, zone, first, now)]
    window_start = now - schedule.spec.catchup_window
    expected = [s for s in every if s >= window_start]
    assert [p.slot_at for p in plan.slots] == expected  # no slot twice, none lost inside the window
    if any(s < window_start for s in every):
        assert plan.too_old is not None and plan.too_old.end_at == window_start
    assert plan.next_run_at > now
    state = policies.OverlapState(active, 0)
    final = [policies.decide_overlap(p.status, overlap, state)[0] for p in plan.slots]
    assert all(s in {RunStatus.QUEUED, RunStatus.PENDING, RunStatus.MISSED, RunStatus.SKIPPED,
                     RunStatus.MANUAL_REQUIRED} for s in final)
    runs_to_make = sum(1 for s in final if s in (RunStatus.QUEUED, RunStatus.PENDING))
    if misfire is Misfire.RUN_ONCE:
        assert runs_to_make <= 1


# --- recovery and stalled ----------------------------------------------------

def test_decide_recovery_retries_at_once_until_the_budget_is_spent() -> None:
    now = at(12)
    retry = policies.decide_recovery(attempts_used=2, max_attempts=3, lease_owner="h:1", reason="lease expired",
                                     now=now)
    assert retry.status is RunStatus.RETRY_PENDING and retry.not_before == now
    assert retry.error_code == "LEASE_EXPIRED" and "h:1" in retry.error_message
    assert "lease expired" in retry.error_message
    spent = policies.decide_recovery(attempts_used=3, max_attempts=3, lease_owner="h:1", reason="lease expired",
                                     now=now)
    assert spent.status is RunStatus.FAILED and spent.not_before is None
    assert "3 times" in spent.error_message


@pytest.mark.parametrize(("status", "claimed_min_ago", "lease_left_s", "expected"), [
    (RunStatus.RUNNING, 31, 30, True),     # past max_runtime, lease alive
    (RunStatus.RUNNING, 31, -1, False),    # lease expired: lost, not stalled (the reconciler recovers it)
    (RunStatus.RUNNING, 29, 30, False),    # within max_runtime
    (RunStatus.SUCCESS, 31, 30, False),    # only RUNNING runs stall
    (RunStatus.RUNNING, None, 30, False),  # never claimed
])
def test_is_stalled_needs_running_past_max_runtime_with_a_live_lease(
        status: RunStatus, claimed_min_ago: int | None, lease_left_s: int, expected: bool) -> None:
    now = at(12)
    claimed = None if claimed_min_ago is None else now - timedelta(minutes=claimed_min_ago)
    assert policies.is_stalled(status, claimed, now + timedelta(seconds=lease_left_s), timedelta(minutes=30),
                               now) is expected


def test_retry_budget_does_not_count_attempts_given_back() -> None:
    # A fresh run: its attempts count against [worker] max_attempts.
    assert policies.retry_budget(attempt=2, run_max_attempts=3, configured=3) == (2, 3)
    # Two hand-backs raised the run's max_attempts to 5: its fourth attempt is its second of three.
    assert policies.retry_budget(attempt=4, run_max_attempts=5, configured=3) == (2, 3)
    # A run created under a smaller budget keeps it.
    assert policies.retry_budget(attempt=1, run_max_attempts=2, configured=3) == (1, 2)


def test_a_current_window_ends_at_the_slot_and_a_previous_one_covers_the_whole_period() -> None:
    from datetime import UTC, datetime

    from engine.core import policies
    from engine.core.models import PeriodKind
    from engine.core.schedule_spec import ReportOn

    slot = datetime(2026, 9, 29, 10, 30, tzinfo=UTC)  # 19:30 in Seoul
    today = policies.business_period(PeriodKind.DAY, slot, "Asia/Seoul", ReportOn.CURRENT)
    window, rule = policies.collect_window(today, slot, ReportOn.CURRENT)
    assert (window.start_at, window.end_at, rule) == (today.start_at, slot, policies.WINDOW_UNTIL_SLOT)
    yesterday = policies.business_period(PeriodKind.DAY, slot, "Asia/Seoul", ReportOn.PREVIOUS)
    assert policies.collect_window(yesterday, slot, ReportOn.PREVIOUS) == (yesterday, policies.WINDOW_WHOLE_PERIOD)


# --- interval windows: from the previous slot to this one (coverage) -----------------------------

def test_an_interval_window_runs_from_the_previous_slot_and_is_keyed_by_the_day_it_ends_in() -> None:

    spec = ScheduleSpec(name="d", workflow="daily_report", project="p", cron="30 18 * * 1-5", timezone="Asia/Seoul",
                        report_on=ReportOn.INTERVAL)
    monday = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)  # 18:30 in Seoul
    period = policies.business_period(PeriodKind.DAY, monday, "Asia/Seoul", ReportOn.INTERVAL)
    window, rule = policies.collect_window(period, monday, ReportOn.INTERVAL, new_runs.previous_slot(spec, monday))
    assert period.key == "2026-11-30" and rule == "since_previous_slot"
    # Monday's report covers Friday 18:30 to Monday 18:30: the weekend is in it.
    assert (window.start_at, window.end_at) == (datetime(2026, 11, 27, 9, 30, tzinfo=UTC), monday)


def test_an_interval_weekly_at_monday_midnight_is_keyed_by_the_week_that_ended() -> None:

    slot = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)  # Monday 00:00 UTC
    assert policies.business_period(PeriodKind.WEEK, slot, "UTC", ReportOn.INTERVAL).key == "2026-W49"
    first, last = policies.slot_dates_for_period(PeriodKind.WEEK, date(2026, 12, 2), ReportOn.INTERVAL)
    assert first <= date(2026, 12, 7) <= last


def test_a_current_window_whose_slot_starts_its_period_is_refused() -> None:

    for expr, kind in (("0 0 * * *", PeriodKind.DAY), ("0 0 * * 1", PeriodKind.WEEK)):
        spec = ScheduleSpec(name="d", workflow="w", project="p", cron=expr, timezone="UTC", report_on=ReportOn.CURRENT)
        with pytest.raises(errors.ConfigInvalid, match="empty window") as caught:
            validate.check_schedule(spec, kind)
        assert caught.value.key == "report_on"
    fine = ScheduleSpec(name="d", workflow="w", project="p", cron="30 19 * * *", timezone="UTC",
                        report_on=ReportOn.CURRENT)
    validate.check_schedule(fine, PeriodKind.DAY)


def test_a_team_parent_still_waiting_past_its_deadline_is_late() -> None:
    from engine.core import slo

    slot = datetime(2026, 11, 30, 10, 30, tzinfo=UTC)
    waiting = {slot: slo.PeriodFact(slot, RunStatus.WAITING, None)}
    late = slo.late_slots([slot], waiting, now=slot + timedelta(hours=2), deadline=timedelta(hours=1))
    assert late == [slot]
