"""A run's end, written once: the one function every way a run ends goes through.

The worker (a run's last step, a failure, a cancel seen at a boundary, a hand-back,
a fan-out's wait), the reconciler (a lost worker's run) and an operator's cancel
each decide a ``run_end.RunEnd``; ``finish_run`` writes it in the caller's
transaction with every after-effect ``run_end.decide_after_effects`` names:
the run's row (the lease dropped), its attempt closed, the attempt given back,
the schedule's next PENDING run promoted, a WAITING parent released, the alert
recorded in the outbox. A guard that fails raises and the transaction writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection

from engine.core import run_end
from engine.core.models import Run, RunStatus
from engine.core.run_end import RunEnd
from engine.store import attempt_rows, claims, families, outbox, promotion, run_rows, upstream_rows


@dataclass(frozen=True)
class Holder:
    """The claim a run is finished under: its fencing token and attempt number.

    ``fence`` None skips the token check; ``expired_by`` then guards on the lease having
    run out by that instant instead (a reconciler taking a lost worker's run).
    """

    fence: int | None
    attempt: int
    expired_by: datetime | None = None


@dataclass(frozen=True)
class Finished:
    """What a run's end set off: the run promoted after it, whether its parent was released, the alert."""

    promoted: int | None = None
    parent_released: bool = False
    alerted: bool = False


def finish_run(conn: Connection, run: Run, end: RunEnd, now: datetime, *, holder: Holder | None) -> Finished:
    """Write ``end`` for ``run`` and its after-effects, in the caller's transaction.

    ``holder``: the claim of a RUNNING run (its lease is released under the claim's
    guard, ``LeaseLost`` when it fails, and the claim's attempt closes with
    ``end.outcome``); None for a run no worker holds (an operator's cancel: the
    transition table guards it, ``InvalidTransition`` when it fails, and a pending
    recovery attempt closes with ``end.outcome`` and ``end.note``).
    """
    effects = run_end.decide_after_effects(end, has_parent=run.parent_id is not None)
    if holder is not None:
        claims.release_run(conn, run.id, holder.fence, end.status, now, not_before=end.not_before,
                           error_code=end.error_code, error_message=end.error_message,
                           next_attempt_trigger=end.next_trigger, lease_expired_by=holder.expired_by)
        attempt_rows.finish_attempt(conn, run.id, holder.attempt, end.outcome, now, end.error_code,
                                    end.error_message)
    else:
        run_rows.set_status(conn, run.id, end.status, completed_at=now, reason=end.reason)
        attempt_rows.close_pending_attempt(conn, run.id, end.outcome, now, end.note or end.status.value.lower())
    if effects.give_back_attempt:
        attempt_rows.add_attempt_budget(conn, run.id, 1)
    promoted = promotion.promote_pending(conn, run.schedule_id, now) if effects.promote_next else None
    if end.status is RunStatus.SUCCESS and run.schedule_id is not None:  # the runs that waited for it (SPEC §18)
        upstream_rows.release_ready(conn, now)
    released = effects.release_parent and run.parent_id is not None and families.release_parent(conn, run.parent_id)
    alerted = False
    if effects.alert is not None:  # the alert commits with the outcome (SPEC §15.1); the sender posts it later
        alerted = outbox.record_run_event(
            conn, run, effects.alert, now, run_end.alert_summary(run.id, run.idempotency_key, end),
            details={"error_code": end.error_code, "error": end.error_message, "step": end.failed_step})
    elif effects.recovered:
        alerted = outbox.record_recovered(conn, run, now)
    return Finished(promoted, released, alerted)
