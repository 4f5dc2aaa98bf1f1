"""Pure deciders: business periods, misfire, overlap, retry backoff, in-step retry waits, jitter, recovery, stalled.

Every function here is a function of values and ``now``: no database, no
clock, no randomness that is not derived from its inputs. The shells
(``scheduler``, ``worker``, ``reconciler``) load, call these, and persist.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from engine.core import period_keys
from engine.core.cron import timetable
from engine.core.models import AttemptTrigger, Period, PeriodKind, Run, RunStatus, RunTrigger, SlotReason
from engine.core.schedule_spec import Misfire, Overlap, ReportOn, Schedule, ScheduleSpec, Sprint

# --- business periods -------------------------------------------------------

def _local_midnight(day: date, zone: ZoneInfo) -> datetime:
    # fold=0 and a round trip through UTC: a midnight inside a DST gap moves to the first valid instant.
    return datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)


def period_of_date(kind: PeriodKind, day: date, tz: str, sprint: Sprint | None = None) -> Period:
    """The day, ISO week (Monday 00:00 to Monday 00:00 local), month, quarter or sprint (of ``sprint``)
    containing ``day``."""
    if kind is PeriodKind.SLOT:
        raise ValueError("a slot period is defined by its slot, not a date")
    zone = ZoneInfo(tz)
    first, after = period_keys.span(kind, day, sprint)
    return Period(period_keys.format(kind, first, sprint), _local_midnight(first, zone), _local_midnight(after, zone),
                  tz)


def business_period(kind: PeriodKind, slot_at: datetime, tz: str, report_on: ReportOn,
                    sprint: Sprint | None = None) -> Period:
    """The period a run for ``slot_at`` reports on; fixed when the run is created.

    ``previous`` reports on the period before the slot's local date (complete);
    ``current`` on the slot's own period; ``interval`` on the period its window ends in (the
    one holding the instant just before the slot: a 19:30 daily is that day's, a Monday
    00:00 weekly the week that just ended). A ``slot`` period is the fire itself.
    """
    if kind is PeriodKind.SLOT:
        at = slot_at.astimezone(UTC)
        return Period(period_keys.format(kind, at), at, at, tz)
    if report_on is ReportOn.INTERVAL:
        slot_at = slot_at - timedelta(microseconds=1)
    local_day = slot_at.astimezone(ZoneInfo(tz)).date()
    if report_on is ReportOn.PREVIOUS:  # the day before the period's first: in the period before
        local_day = period_keys.span(kind, local_day, sprint)[0] - timedelta(days=1)
    return period_of_date(kind, local_day, tz, sprint)


# Pinned as ``window_rule``: runs created before it existed have none, and keep the window they pinned.
WINDOW_UNTIL_SLOT = "until_slot"
WINDOW_WHOLE_PERIOD = "whole_period"
WINDOW_SINCE_PREVIOUS_SLOT = "since_previous_slot"


def collect_window(period: Period, slot_at: datetime, report_on: ReportOn,
                   previous_slot_at: datetime | None = None) -> tuple[Period, str]:
    """The window a run collects, and its rule.

    ``current``: the period up to the slot. ``interval``: from the schedule's previous
    slot (``previous_slot_at``; the period's start when there is none) to this one, so
    consecutive slots tile time. ``previous``: the whole period. The end is the slot,
    never the moment the run executes, so a run that starts late or is retried a day
    later reports exactly the same commits.
    """
    slot = slot_at.astimezone(UTC)
    if report_on is ReportOn.INTERVAL:
        start = previous_slot_at.astimezone(UTC) if previous_slot_at is not None else min(period.start_at, slot)
        return replace(period, start_at=start, end_at=slot), WINDOW_SINCE_PREVIOUS_SLOT
    if report_on is ReportOn.CURRENT and period.start_at < slot < period.end_at:
        return replace(period, end_at=slot), WINDOW_UNTIL_SLOT
    return period, WINDOW_WHOLE_PERIOD


def slot_dates_for_period(kind: PeriodKind, day: date, report_on: ReportOn,
                          sprint: Sprint | None = None) -> tuple[date, date]:
    """Local dates [first, last] on which the slot reporting on ``day``'s period fires."""
    if report_on is ReportOn.INTERVAL and kind is not PeriodKind.SLOT:  # its slot ends in the period, or at its end
        first, last = slot_dates_for_period(kind, day, ReportOn.CURRENT, sprint)
        return first, last + timedelta(days=1)
    if kind is PeriodKind.SLOT:
        return day, day
    first, after = period_keys.span(kind, day, sprint)
    if report_on is ReportOn.PREVIOUS:  # the slot fires in the period after
        first, after = period_keys.span(kind, after, sprint)
    return first, after - timedelta(days=1)


def slot_for_date(spec: ScheduleSpec, kind: PeriodKind, day: date) -> datetime | None:
    """The first slot of ``spec``'s cron that reports on ``day``'s period; None when the cron has none."""
    first, last = slot_dates_for_period(kind, day, spec.report_on, spec.sprint)
    key = period_of_date(kind, day, spec.timezone, spec.sprint).key if kind is not PeriodKind.SLOT else None
    fires = [f for f in timetable.fires_on_local_dates(spec.cron, spec.timezone, first, last,
                                                       dst_gap=spec.dst_gap, dst_fold=spec.dst_fold)
             if key is None or business_period(kind, f.at, spec.timezone, spec.report_on, spec.sprint).key == key]
    return fires[0].at if fires else None


def base_key(workflow: str, project: str, business_key: str) -> str:
    """The key every revision of one business period shares (one RUNNING run per base key)."""
    return f"{workflow}:{project}:{business_key}"


def idempotency_key(workflow: str, project: str, business_key: str, revision: int = 1) -> str:
    """A run's unique key: its base key, with ``#revision`` from the second revision on."""
    base = base_key(workflow, project, business_key)
    return base if revision == 1 else f"{base}#{revision}"


# --- the tick: which slots, and what becomes of each -----------------------

@dataclass(frozen=True)
class PlannedSlot:
    slot_at: datetime
    status: RunStatus  # QUEUED (to run), MISSED, MANUAL_REQUIRED, then PENDING/SKIPPED after overlap
    reason: SlotReason | None = None
    not_before: datetime | None = None


@dataclass(frozen=True)
class TooOldRange:
    start_at: datetime
    end_at: datetime
    estimated_slots: int


@dataclass(frozen=True)
class TickPlan:
    schedule_id: int
    expected_next_run_at: datetime
    next_run_at: datetime
    slots: tuple[PlannedSlot, ...]
    too_old: TooOldRange | None


def decide_misfire(slots: Sequence[datetime], now: datetime, grace: timedelta, misfire: Misfire) -> list[PlannedSlot]:
    """What each due slot becomes (SPEC §3.3). Slots must be ascending and <= now."""
    on_time = [now - slot <= grace for slot in slots]
    planned: list[PlannedSlot] = []
    for index, slot in enumerate(slots):
        if on_time[index] or misfire is Misfire.CATCH_UP_ALL:
            planned.append(PlannedSlot(slot, RunStatus.QUEUED))
        elif misfire is Misfire.RUN_ONCE and index == len(slots) - 1:
            planned.append(PlannedSlot(slot, RunStatus.QUEUED))
        elif misfire is Misfire.MANUAL:
            planned.append(PlannedSlot(slot, RunStatus.MANUAL_REQUIRED, SlotReason.MISFIRE))
        else:
            planned.append(PlannedSlot(slot, RunStatus.MISSED, SlotReason.MISFIRE))
    if misfire is Misfire.RUN_ONCE:
        # One run in all: the latest slot; every earlier one (even on time) is MISSED.
        last = len(planned) - 1
        planned = [p if i == last or p.status is not RunStatus.QUEUED
                   else PlannedSlot(p.slot_at, RunStatus.MISSED, SlotReason.MISFIRE)
                   for i, p in enumerate(planned)]
    return planned


@dataclass
class OverlapState:
    """Active (QUEUED, RUNNING, RETRY_PENDING, PENDING) and PENDING scheduled runs of a schedule."""

    active: int
    pending: int


def decide_overlap(status: RunStatus, policy: Overlap, state: OverlapState) -> tuple[RunStatus, SlotReason | None]:
    """The status of one new scheduled run that would be QUEUED, and update ``state``.

    Called in slot order, so runs created earlier in the same tick count.
    """
    if status is not RunStatus.QUEUED:
        return status, None
    if state.active == 0 or policy is Overlap.ALLOW:
        state.active += 1
        return RunStatus.QUEUED, None
    if policy is Overlap.QUEUE_NEW or (policy is Overlap.BUFFER_ONE and state.pending == 0):
        state.active += 1
        state.pending += 1
        return RunStatus.PENDING, None
    return RunStatus.SKIPPED, SlotReason.OVERLAP


def jitter_delay(schedule_id: int, slot_at: datetime, jitter: timedelta) -> timedelta:
    """A delay in [0, jitter), derived from the slot so every scheduler picks the same one."""
    if jitter <= timedelta(0):
        return timedelta(0)
    digest = hashlib.sha256(f"{schedule_id}:{slot_at.isoformat()}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return timedelta(seconds=int(jitter.total_seconds() * fraction))


def plan_tick(schedule: Schedule, now: datetime) -> TickPlan | None:
    """Slots due for ``schedule`` at ``now`` and the misfire decision for each (SPEC §3.2-3.3, §3.5).

    Slots older than the catch-up window are never enumerated: they become one
    ``too_old`` range with an estimated count. Returns None when nothing is due.
    """
    spec = schedule.spec
    if schedule.next_run_at is None or schedule.next_run_at > now:
        return None
    window_start = now - spec.catchup_window
    start = max(schedule.next_run_at, window_start)
    too_old = None
    if schedule.next_run_at < window_start:
        estimate = timetable.estimate_fire_count(spec.cron, spec.timezone, schedule.next_run_at, window_start)
        too_old = TooOldRange(schedule.next_run_at, window_start, estimate)
    fires = [f.at for f in timetable.fires_between(spec.cron, spec.timezone, start, now,
                                              dst_gap=spec.dst_gap, dst_fold=spec.dst_fold)]
    planned = decide_misfire(fires, now, spec.grace, spec.misfire)
    if spec.jitter > timedelta(0):
        planned = [replace(p, not_before=p.slot_at + jitter_delay(schedule.id, p.slot_at, spec.jitter))
                   if p.status is RunStatus.QUEUED else p for p in planned]
    following = timetable.next_fire_after(spec.cron, spec.timezone, now, dst_gap=spec.dst_gap, dst_fold=spec.dst_fold)
    return TickPlan(schedule.id, schedule.next_run_at, following.at, tuple(planned), too_old)


# --- retries and leases -----------------------------------------------------

@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    not_before: datetime | None


@dataclass(frozen=True)
class RetryWait:
    """An in-step retry's next move: wait ``wait_s`` seconds and try again, or stop (``wait_s`` None)."""

    wait_s: float | None

    @property
    def stop(self) -> bool:
        """True when the last error goes up instead of another try."""
        return self.wait_s is None


def decide_call_retry(*, attempts: int, max_attempts: int | None, left_s: float, backoff_s: float,
                      retry_after_s: float | None = None) -> RetryWait:
    """After ``attempts`` failed tries of a call retried inside a step: how long to wait, or stop.

    The wait is the server's Retry-After when it gave one, else ``backoff_s`` (the
    jittered exponential backoff the caller drew). Retrying stops when ``max_attempts``
    tries are made, when nothing is left of the waiting budget (``left_s``), or when
    the wait is longer than what is left: a wait is taken whole or not at all, and a
    Retry-After beyond the budget goes up with the error (the run's ``not_before``).
    """
    if (max_attempts is not None and attempts >= max_attempts) or left_s <= 0:
        return RetryWait(None)
    wait_s = max(0.0, backoff_s if retry_after_s is None else retry_after_s)
    return RetryWait(wait_s if wait_s <= left_s else None)


def retry_budget(*, attempt: int, run_max_attempts: int, configured: int) -> tuple[int, int]:
    """(attempts used, attempts allowed) for a step failure's retry decision.

    A run's ``max_attempts`` grows past ``[worker] max_attempts`` with every attempt
    given back (a hand-back at shutdown, an operator's retry): those attempts are not
    counted as used, and the budget is never more than the configured one.
    """
    granted = max(0, run_max_attempts - configured)
    return attempt - granted, min(configured, run_max_attempts)


def decide_run_retry(*, attempts_used: int, max_attempts: int, backoff: timedelta, now: datetime,
                 retryable: bool, retry_after: timedelta | None = None) -> RetryDecision:
    """RETRY_PENDING with backoff ×4 per attempt (1m, 4m, 16m...) or FAILED once the budget is spent.

    A server's Retry-After (or a wait too long to spend inside a step) is a floor.
    """
    if not retryable or attempts_used >= max_attempts:
        return RetryDecision(False, None)
    delay = backoff * (4 ** max(0, attempts_used - 1))
    if retry_after is not None:
        delay = max(delay, retry_after)
    return RetryDecision(True, now + delay)


@dataclass(frozen=True)
class RecoveryDecision:
    """What becomes of a RUNNING run whose worker is gone (SPEC §5).

    ``status`` is RETRY_PENDING (a recovery attempt is queued, claimable from
    ``not_before``) or FAILED (the budget is spent); the lost attempt and the
    step that was running end with ``error_code``/``error_message``.
    """

    status: RunStatus
    error_code: str
    error_message: str
    not_before: datetime | None


def decide_recovery(*, attempts_used: int, max_attempts: int, lease_owner: str | None, reason: str,
                    now: datetime) -> RecoveryDecision:
    """Recover a run whose lease was lost: retry at once, or FAILED once ``max_attempts`` are used.

    Recovery attempts count toward the budget, so a run that keeps killing its
    worker ends FAILED instead of looping.
    """
    if attempts_used >= max_attempts:
        return RecoveryDecision(RunStatus.FAILED, "LEASE_EXPIRED",
                                f"worker {lease_owner} lost the run {attempts_used} times", None)
    return RecoveryDecision(RunStatus.RETRY_PENDING, "LEASE_EXPIRED",
                            f"worker {lease_owner} stopped renewing its lease ({reason})", now)


def lease_expired(lease_until: datetime | None, now: datetime) -> bool:
    """Whether a lease is gone at ``now`` (none, or ended before ``now``)."""
    return lease_until is None or lease_until < now


def is_stalled(status: RunStatus, claimed_at: datetime | None, lease_until: datetime | None,
               max_runtime: timedelta, now: datetime) -> bool:
    """The one definition of "stalled" (SPEC §4): RUNNING past ``max_runtime`` since its claim, lease alive.

    A RUNNING run whose lease has expired is not stalled but lost: the
    reconciler recovers it instead.
    """
    return (status is RunStatus.RUNNING and claimed_at is not None and not lease_expired(lease_until, now)
            and now - claimed_at > max_runtime)


def run_is_stalled(run: Run, now: datetime) -> bool:
    """``is_stalled`` for a loaded run (runs list, its JSON, doctor)."""
    return is_stalled(run.status, run.claimed_at, run.lease_until, timedelta(seconds=run.max_runtime_s), now)


def past_start_by(run: Run, start_by: timedelta | None, now: datetime) -> bool:
    """Whether a scheduled run that never started is past its schedule's ``start_by`` (it is MISSED, not run: a
    report due at 09:00 is not made at 15:00 unless an operator asks). Only the schedule's own first try counts:
    a trigger, a backfill or a retry is an explicit request."""
    first_try = run.next_attempt_trigger in (None, AttemptTrigger.SCHEDULED)  # not queued again by a person
    return (start_by is not None and run.trigger is RunTrigger.SCHEDULED and first_try and run.started_at is None
            and run.attempt_count == 0 and run.scheduled_for + start_by < now)


def is_silent(next_run_at: datetime | None, grace: timedelta, now: datetime) -> bool:
    """An enabled schedule whose next slot is older than its grace: no scheduler is ticking."""
    return next_run_at is not None and now - next_run_at > grace


def decide_loop_retry_delay(failures: int, poll: timedelta) -> float:
    """Seconds before a loop tries again after ``failures`` database errors in a row: doubling, at most 5 s."""
    base = max(poll.total_seconds(), 0.05)
    return float(min(base * 2 ** max(0, failures - 1), max(base, 5.0)))
