"""How a run ends, and what its end sets off: pure values and the decision, no I/O.

Every way a run leaves a worker's hands or an operator's queue (a step boundary, a
failure, a recovery, a cancel, a hand-back, a fan-out's wait) is one ``RunEnd``;
``engine.store.finish.finish_run`` writes it and the after-effects
``decide_after_effects`` names, in the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.core.alerts import AlertEvent
from engine.core.models import TERMINAL_STATUSES, AttemptOutcome, AttemptTrigger, RunStatus

#: The alert a run's end raises (at most once per run); SUCCESS may raise ``recovered`` instead.
ALERT_OF_STATUS = {RunStatus.FAILED: AlertEvent.RUN_FAILED, RunStatus.PARTIAL_SUCCESS: AlertEvent.RUN_PARTIAL}


@dataclass(frozen=True)
class RunOutcome:
    """What executing one claimed run came to (``RUNNING`` with ``LEASE_LOST``: another worker has it now)."""

    run_id: int
    key: str
    status: RunStatus
    error_code: str | None = None


@dataclass(frozen=True)
class RunEnd:
    """A run's new status and the close of its attempt, as its caller decided them.

    ``outcome``: of the attempt that ends (for a run no worker held, of its pending one,
    if any). ``reason``: why, in words, beyond the code: the alert's summary ends with it,
    and a run no worker held keeps it in its ``reason`` column. ``note``: the message of a
    pending attempt closed because no worker took it.
    """

    status: RunStatus
    outcome: AttemptOutcome
    error_code: str | None = None
    error_message: str | None = None
    not_before: datetime | None = None
    next_trigger: AttemptTrigger | None = None
    failed_step: str | None = None
    reason: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class AfterEffects:
    """What a run's end sets off, besides its own row and attempt."""

    give_back_attempt: bool  # a released attempt (hand-back, fan-out wait) does not count against the budget
    promote_next: bool  # the schedule's oldest PENDING run may be queued now
    release_parent: bool  # a child's end may let its WAITING parent go on
    alert: AlertEvent | None  # the event recorded with the end (``ALERT_OF_STATUS``)
    recovered: bool  # a SUCCESS closes its period's earlier alerts (``recovered``, once per period)


def decide_after_effects(end: RunEnd, *, has_parent: bool) -> AfterEffects:
    """The after-effects of ``end``: a terminal status frees the schedule's slot and its parent's wait;
    RETRY_PENDING, WAITING and a hand-back keep the slot (the run is still in flight)."""
    final = end.status in TERMINAL_STATUSES
    return AfterEffects(
        give_back_attempt=end.outcome is AttemptOutcome.RELEASED,
        promote_next=final,
        release_parent=final and has_parent,
        alert=ALERT_OF_STATUS.get(end.status),
        recovered=end.status is RunStatus.SUCCESS,
    )


def alert_summary(run_id: int, key: str, end: RunEnd) -> str:
    """The one line of a run's end alert: ``run 7 KEY failed at write: CODE (reason)``."""
    what = "failed" if end.status is RunStatus.FAILED else f"ended {end.status.value}"
    where = f" at {end.failed_step}" if end.failed_step else ""
    why = f" ({end.reason})" if end.reason else ""
    return f"run {run_id} {key} {what}{where}: {end.error_code or 'ERROR'}{why}"
