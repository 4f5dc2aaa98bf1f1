"""A run and its parts: statuses, triggers, its period, steps, attempts, artifacts, and a run not inserted yet.

The status sets below name each rule of the run statuses once; ``ProviderWait`` is what a finished run
waits for (SPEC §15.5).

Every enum is a ``StrEnum`` whose values are what the database stores.
ORM/Core rows never leave ``engine.store``: they are converted to these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from engine.core.deliveries import Delivery
from engine.core.schedule_spec import SCHEDULE_RANK, SchedulePriority


class RunStatus(StrEnum):
    PENDING = "PENDING"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    RETRY_PENDING = "RETRY_PENDING"
    WAITING = "WAITING"  # its child runs are working; holds no lease (SPEC §17)
    SUCCESS = "SUCCESS"
    PARTIAL_SUCCESS = "PARTIAL_SUCCESS"
    FAILED = "FAILED"
    MISSED = "MISSED"
    SKIPPED = "SKIPPED"
    MANUAL_REQUIRED = "MANUAL_REQUIRED"
    CANCELLED = "CANCELLED"


# Subsets of the run statuses, each named once here by its rule (tests/unit/test_transitions.py checks how
# they relate: every status is active, terminal or awaiting an operator, and no two of those overlap).

#: Will still run, or is running: the period's outcome is not known yet (a team parent WAITING included).
ACTIVE_STATUSES = frozenset({RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRY_PENDING,
                             RunStatus.WAITING})
#: Finished for good: no worker will touch it again unless an operator asks.
TERMINAL_STATUSES = frozenset({
    RunStatus.SUCCESS, RunStatus.PARTIAL_SUCCESS, RunStatus.FAILED,
    RunStatus.MISSED, RunStatus.SKIPPED, RunStatus.CANCELLED,
})
#: Waits for an operator's decision (``runs approve``) before it can run.
AWAITING_OPERATOR_STATUSES = frozenset({RunStatus.MANUAL_REQUIRED})
#: Not finished: active, or awaiting an operator (a parent waits while a child is in one of these).
UNFINISHED_STATUSES = ACTIVE_STATUSES | AWAITING_OPERATOR_STATUSES
#: Not started yet: a disabled schedule holds these (SPEC §15.3); a RUNNING one goes on.
HOLDABLE_STATUSES = frozenset({RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RETRY_PENDING})
#: Why a run is held, or was cancelled, while its schedule is disabled: one wording wherever it is said.
HELD_BY_DISABLED = "schedule disabled"
#: Waiting for a worker (once ``not_before`` has passed); the order is the SQL's (a partial index repeats it).
CLAIMABLE_STATUSES = (RunStatus.QUEUED, RunStatus.RETRY_PENDING)
#: A scheduled run in one of these holds its schedule's slot: the schedule's next run waits PENDING (SPEC §3.4).
BUSY_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRY_PENDING, RunStatus.WAITING)
#: An operator may cancel it at once (a RUNNING run stops at its next step boundary instead).
CANCELLABLE_STATUSES = HOLDABLE_STATUSES | AWAITING_OPERATOR_STATUSES
#: Finished without running: a misfire, an overlap policy or an operator decided so.
UNRUN_STATUSES = frozenset({RunStatus.MISSED, RunStatus.SKIPPED, RunStatus.CANCELLED})
#: The period's report exists (PARTIAL_SUCCESS: saved, the upload failed).
SUCCESSFUL_STATUSES = frozenset({RunStatus.SUCCESS, RunStatus.PARTIAL_SUCCESS})
#: A run that ran and failed, whole or in part (its report saved, the upload failed): what a retry is for.
FAILURE_STATUSES = frozenset({RunStatus.FAILED, RunStatus.PARTIAL_SUCCESS})
#: A period that did not succeed and was alerted: counted in a schedule's consecutive failures.
UNSUCCESSFUL_STATUSES = FAILURE_STATUSES | {RunStatus.MISSED, RunStatus.MANUAL_REQUIRED}
#: An operator may queue it again (``runs retry``): finished without success, or waiting for a retry.
RETRYABLE_STATUSES = FAILURE_STATUSES | {RunStatus.RETRY_PENDING} | UNRUN_STATUSES


class RunTrigger(StrEnum):
    SCHEDULED = "SCHEDULED"
    MANUAL = "MANUAL"
    BACKFILL = "BACKFILL"


class AttemptTrigger(StrEnum):
    SCHEDULED = "scheduled"
    MANUAL = "manual"
    BACKFILL = "backfill"
    AUTO = "auto"
    RECOVERY = "recovery"
    HANDBACK = "handback"
    FAN_IN = "fan_in"  # the parent's last child finished: it resumes at the step after its fan-out


class AttemptOutcome(StrEnum):
    PENDING = "pending"  # decided (a recovery) but no worker has taken it yet
    RUNNING = "running"
    SUCCESS = "success"
    PARTIAL_SUCCESS = "partial_success"
    RETRY = "retry"
    FAILED = "failed"
    LOST = "lost"
    RELEASED = "released"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"  # a pending attempt replaced by an operator's retry before any worker took it


class StepStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"


class PeriodKind(StrEnum):
    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    QUARTER = "quarter"
    SPRINT = "sprint"
    SLOT = "slot"


class SlotReason(StrEnum):
    """Why a slot was not run (SPEC §3.3)."""

    MISFIRE = "misfire"
    OVERLAP = "overlap"
    TOO_OLD = "too_old"
    DISABLED = "disabled"
    START_BY = "start_by"  # queued on time, not started by the schedule's start_by
    HOLIDAY = "holiday"  # its local date is a holiday of the schedule's calendar (SPEC §18)
    MAINTENANCE = "maintenance"  # inside a maintenance window or a pause (SPEC §18)
    UPSTREAM = "upstream"  # its upstream schedule's covering period was not SUCCESS within ``after_window``


# Priority of the trigger that last queued a run: MANUAL > SCHEDULED > BACKFILL.
PRIORITY = {
    AttemptTrigger.MANUAL: 30,
    AttemptTrigger.SCHEDULED: 20,
    AttemptTrigger.AUTO: 20,
    AttemptTrigger.RECOVERY: 20,
    AttemptTrigger.HANDBACK: 20,
    AttemptTrigger.FAN_IN: 20,
    AttemptTrigger.BACKFILL: 10,
}


@dataclass(frozen=True)
class Period:
    """A business period: its key and its window, [start, end) in UTC."""

    key: str
    start_at: datetime
    end_at: datetime
    timezone: str

    def window_local(self) -> tuple[str, str]:
        """The period's start and end as local ISO 8601 times in its timezone."""
        from zoneinfo import ZoneInfo

        zone = ZoneInfo(self.timezone)
        return (self.start_at.astimezone(zone).isoformat(), self.end_at.astimezone(zone).isoformat())


@dataclass(frozen=True)
class StepRecord:
    run_id: int
    position: int
    name: str
    status: StepStatus
    attempts: int
    output: dict[str, Any] | None
    started_at: datetime | None
    finished_at: datetime | None
    error_code: str | None
    error_message: str | None


@dataclass(frozen=True)
class AttemptRecord:
    run_id: int
    number: int
    trigger: AttemptTrigger
    from_step: str | None
    outcome: AttemptOutcome
    worker_id: str | None
    started_at: datetime | None
    finished_at: datetime | None
    error_code: str | None
    error_message: str | None


@dataclass(frozen=True)
class ArtifactRecord:
    run_id: int
    kind: str
    step: str  # the step that made it: `runs retry RUN --from-step STEP` makes it again
    location: str
    sha256: str | None
    external_id: str | None
    created_at: datetime | None


@dataclass(frozen=True)
class ProviderWait:
    """What a run waits for (SPEC §15.5): the outside service whose failure it ended with, or worked around.

    Written when the run finishes (``engine.store.health_rows``); the healer re-queues the run
    ``from_step`` once the provider's probe answers healthy. ``degraded``: the run succeeded
    around the failure (a fallback) and is run again in place. The ``healthy``... fields are
    the provider's latest probe (None: not probed yet).
    """

    run_id: int
    provider: str
    label: str  # what a person reads: "ollama at http://127.0.0.1:11434"
    error_code: str
    step: str
    degraded: bool
    since_at: datetime
    recoveries: int  # automatic re-queues of this run so far
    check_after: datetime | None  # when the healer looks at it next (None: not until the run ends again)
    gave_up: str | None = None  # why no automatic re-queue will come (a person must act), or None
    healthy: bool | None = None
    health_since_at: datetime | None = None
    health_detail: str | None = None
    checked_at: datetime | None = None


@dataclass(frozen=True)
class Run:
    id: int
    schedule_id: int | None
    schedule_name: str | None
    workflow: str
    project: str
    trigger: RunTrigger
    scheduled_for: datetime
    business_key: str
    idempotency_key: str
    revision: int
    status: RunStatus
    priority: int
    not_before: datetime | None
    pinned: dict[str, Any]
    attempt_count: int
    max_attempts: int
    next_attempt_trigger: AttemptTrigger | None
    reason: str | None
    lease_owner: str | None
    lease_until: datetime | None
    fence: int
    cancel_requested: bool
    max_runtime_s: int
    created_at: datetime
    claimed_at: datetime | None
    started_at: datetime | None
    completed_at: datetime | None
    error_code: str | None
    error_message: str | None
    parent_id: int | None = None  # the run whose fan-out step made this one (SPEC §17)
    schedule_priority: int = SCHEDULE_RANK[SchedulePriority.NORMAL]  # its schedule's rank, claimed before ``priority``
    steps: tuple[StepRecord, ...] = field(default=())
    attempts: tuple[AttemptRecord, ...] = field(default=())
    artifacts: tuple[ArtifactRecord, ...] = field(default=())
    children: tuple[Run, ...] = field(default=())  # loaded for ``runs show`` and the run page only
    schedule_enabled: bool | None = None  # None when the row was read without its schedule
    waits_for: ProviderWait | None = None  # loaded by the read side only (``runs list``, ``runs show``, the page)
    # The report's deliveries (``[[deliveries]]``: one per target, shared by its revisions); ``runs show`` and the page.
    deliveries: tuple[Delivery, ...] = field(default=())
    quiet: str | None = None  # why a run that succeeded wrote nothing ("no commits"); ``runs list`` only
    # The upstream periods it waits (or waited) for, ``(schedule, business key)``; ``upstream_until`` is set
    # only while it waits for them (SPEC §18).
    upstream: tuple[tuple[str, str], ...] = ()
    upstream_until: datetime | None = None

    @property
    def held(self) -> str | None:
        """Why no worker claims this run although it waits (``claims`` repeats the rule in SQL), or None."""
        if self.schedule_enabled is False and self.status in HOLDABLE_STATUSES:
            return HELD_BY_DISABLED
        return None

    @property
    def start_delay(self) -> timedelta | None:
        """How long after its slot a scheduled run started; None before it did, and for a run an operator asked
        for (a trigger or a backfill: its slot is the period it reports on, not a time it was due)."""
        if self.started_at is None or self.trigger is not RunTrigger.SCHEDULED:
            return None
        return self.started_at - self.scheduled_for

    @property
    def duration(self) -> timedelta | None:
        """From the run's start to its completion (None until both happened)."""
        if self.started_at is None or self.completed_at is None:
            return None
        return self.completed_at - self.started_at


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run not inserted yet: the columns fixed at its creation.

    ``scheduling.new_runs`` builds it (a slot's run, or a child of a fan-out); the store
    inserts it insert-or-nothing with no attempt, no lease and fence 0.
    """

    workflow: str
    project: str
    trigger: RunTrigger
    scheduled_for: datetime
    business_key: str
    base_key: str
    idempotency_key: str
    status: RunStatus
    priority: int
    pinned: dict[str, Any]
    max_attempts: int
    max_runtime_s: int
    created_at: datetime
    schedule_id: int | None = None  # None for a child run: it belongs to its parent's period
    parent_id: int | None = None
    revision: int = 1
    reason: SlotReason | None = None
    not_before: datetime | None = None
    schedule_priority: int = SCHEDULE_RANK[SchedulePriority.NORMAL]
    upstream: tuple[tuple[str, str], ...] = ()  # what a dependent run waits for (SPEC §18)
    upstream_until: datetime | None = None
