"""A schedule: what the config declares (``ScheduleSpec``), what the store keeps of it (``Schedule``), and the
policies they name (overlap, misfire, DST, priority, upstreams, sprints).

Every enum is a ``StrEnum`` whose values are what the config and the database spell.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Any


class Overlap(StrEnum):
    ALLOW = "ALLOW"
    SKIP_NEW = "SKIP_NEW"
    QUEUE_NEW = "QUEUE_NEW"
    BUFFER_ONE = "BUFFER_ONE"


class Misfire(StrEnum):
    SKIP = "SKIP"
    RUN_ONCE = "RUN_ONCE"
    CATCH_UP_ALL = "CATCH_UP_ALL"
    MANUAL = "MANUAL"


class OnUpstream(StrEnum):
    """What a dependent run does once its ``after_window`` passed without its upstream (SPEC §18)."""

    RUN = "run"  # released anyway
    MANUAL = "manual"  # MANUAL_REQUIRED until an operator approves it
    SKIP = "skip"  # recorded SKIPPED, reason ``upstream``


class Criticality(StrEnum):
    """How loudly a schedule's alerts are sent (a schedule's ``criticality``)."""

    CRITICAL = "critical"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


class SchedulePriority(StrEnum):
    """Which schedule's runs a worker claims first (a schedule's ``priority``); the trigger orders within one."""

    CRITICAL = "critical"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


# The stored rank of a run's schedule priority (``runs.schedule_priority``): the claim's first key.
SCHEDULE_RANK = {SchedulePriority.CRITICAL: 40, SchedulePriority.HIGH: 30, SchedulePriority.NORMAL: 20,
                 SchedulePriority.LOW: 10}


class ReportOn(StrEnum):
    PREVIOUS = "previous"  # the period before the slot's, whole
    CURRENT = "current"  # the slot's own period, up to the slot
    INTERVAL = "interval"  # from the previous slot to this one: consecutive slots tile time


@dataclass(frozen=True)
class Sprint:
    """A schedule's sprints: ``days`` long, one starting on ``anchor`` (and every ``days`` before and after)."""

    anchor: date
    days: int


class DstGap(StrEnum):
    SHIFT = "shift"
    SKIP = "skip"


class DstFold(StrEnum):
    FIRST = "first"
    SECOND = "second"
    BOTH = "both"


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule's definition: what the config declares (no identity, no state)."""

    name: str
    workflow: str
    project: str
    cron: str
    timezone: str
    report_on: ReportOn = ReportOn.PREVIOUS
    overlap: Overlap = Overlap.QUEUE_NEW
    misfire: Misfire = Misfire.CATCH_UP_ALL
    grace: timedelta = timedelta(minutes=10)
    catchup_window: timedelta = timedelta(days=7)
    max_runtime: timedelta = timedelta(minutes=30)
    jitter: timedelta = timedelta(0)
    dst_gap: DstGap = DstGap.SHIFT
    dst_fold: DstFold = DstFold.FIRST
    allow_frequent: bool = False
    enabled: bool = True
    criticality: Criticality = Criticality.NORMAL  # how loudly its alerts are sent
    priority: SchedulePriority = SchedulePriority.NORMAL  # whose runs are claimed first (SPEC §18)
    deadline: timedelta | None = None  # a period not SUCCESS by slot + deadline is late; None: grace + max_runtime
    start_by: timedelta | None = None  # a scheduled run not started by slot + start_by is MISSED; None: never
    # Heals itself (SPEC §15.5): automatic re-queues of one run once the provider that failed it answers
    # again, and of all the schedule's runs in any 24 hours; 0 turns either off.
    auto_recover: int = 3
    auto_recover_daily: int = 50
    freshness_target: float | None = None  # the share of periods due that should be fresh; below: freshness_low
    # Holidays (SPEC §18): a country of the ``holidays`` package, optionally with a subdivision ("KR",
    # "US-CA"), and dates of one's own ("2026-10-09"); slots on those local dates are not run.
    calendar: str | None = None
    holidays: tuple[str, ...] = ()
    # Dependencies (SPEC §18): a run waits WAITING until these schedules' covering periods are SUCCESS,
    # at most ``after_window`` after its slot; then ``on_upstream`` decides.
    after: tuple[str, ...] = ()
    after_window: timedelta = timedelta(hours=6)
    on_upstream: OnUpstream = OnUpstream.RUN
    sprint: Sprint | None = None  # the sprints of a sprint workflow's schedule


@dataclass(frozen=True)
class Schedule:
    """A stored schedule: its definition plus identity, version and timing state."""

    id: int
    spec: ScheduleSpec
    version: int
    enabled: bool
    archived: bool
    next_run_at: datetime | None
    disabled_reason: str | None = None
    disabled_by_cli: bool = False
    disabled_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    applied_definition: dict[str, Any] | None = None  # the definition of the last apply (None: unknown)
    # ``schedules pause NAME --until T``: slots in [paused_from, paused_until) are recorded ``maintenance``.
    paused_from: datetime | None = None
    paused_until: datetime | None = None
    pause_reason: str | None = None

    @property
    def name(self) -> str:
        """The schedule's name (its spec's)."""
        return self.spec.name
