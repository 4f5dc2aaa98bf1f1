"""Recovery writes: a run whose worker is gone, and a recovery attempt that no worker took.

The reconciler decides (``policies.decide_recovery``); these functions persist
the decision inside the caller's transaction. A recovery is written as its own
Attempt (trigger ``recovery``, outcome ``pending``) in the same transaction
that closes the lost one, so ``runs show`` lists it at once; the worker that
claims the run continues that attempt (``claims.acquire_run`` upserts it).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from engine.core.models import AttemptOutcome, AttemptTrigger, Run, RunStatus, StepStatus
from engine.core.policies import RecoveryDecision
from engine.store import claims, families
from engine.store.tables import attempts, runs, steps

_DONE = [StepStatus.SUCCESS.value, StepStatus.SKIPPED.value]


def resume_step(conn: Connection, run_id: int) -> str | None:
    """The step a new attempt starts from: the first one not SUCCESS or SKIPPED (None if all are)."""
    query = (select(steps.c.name).where(steps.c.run_id == run_id, steps.c.status.not_in(_DONE))
             .order_by(steps.c.position).limit(1))
    return conn.execute(query).scalar()


def record_recovery(conn: Connection, run: Run, decision: RecoveryDecision, now: datetime, *,
                    expired_only: bool = True) -> None:
    """Persist a recovery: lost attempt closed, running step FAILED, run to ``decision.status``.

    Guarded on the run still being RUNNING under the token that was read and,
    with ``expired_only``, on its lease having expired by ``now`` (a worker
    that came back and renewed keeps its run): a failed guard raises
    ``LeaseLost`` and the caller's transaction writes nothing. RETRY_PENDING
    adds the pending recovery attempt (number ``attempt_count + 1``), which
    resumes at the step that was running; FAILED promotes the schedule's
    oldest PENDING run.
    """
    retry = decision.status is RunStatus.RETRY_PENDING
    claims.release_run(conn, run.id, run.fence, decision.status, now, not_before=decision.not_before,
                       error_code=decision.error_code, error_message=decision.error_message,
                       next_attempt_trigger=AttemptTrigger.RECOVERY if retry else None,
                       lease_expired_by=now if expired_only else None)
    conn.execute(update(steps).where(steps.c.run_id == run.id, steps.c.status == StepStatus.RUNNING.value)
                 .values(status=StepStatus.FAILED.value, error_code=decision.error_code,
                         error_message=decision.error_message, finished_at=now))
    claims.finish_attempt(conn, run.id, run.attempt_count, AttemptOutcome.LOST, now, decision.error_code,
                          decision.error_message)
    if retry:
        conn.execute(insert(attempts).values(
            run_id=run.id, number=run.attempt_count + 1, trigger=AttemptTrigger.RECOVERY.value,
            from_step=resume_step(conn, run.id), outcome=AttemptOutcome.PENDING.value))
    else:
        claims.promote_pending(conn, run.schedule_id, now)
        if run.parent_id is not None:  # a child that ends here may be its parent's last (SPEC §17)
            families.release_parent(conn, run.parent_id)


def close_pending_attempt(conn: Connection, run_id: int, outcome: AttemptOutcome, now: datetime,
                          message: str) -> bool:
    """Close the run's pending attempt (if any) with ``outcome``: an operator acted before any worker took it.

    The closed attempt keeps its number, so the run's ``attempt_count`` moves
    past it and the next claim opens a new attempt. Returns whether one was closed.
    """
    closed = conn.execute(update(attempts).where(attempts.c.run_id == run_id,
                                                 attempts.c.outcome == AttemptOutcome.PENDING.value)
                          .values(outcome=outcome.value, finished_at=now, error_message=message)).rowcount
    if closed:
        conn.execute(update(runs).where(runs.c.id == run_id).values(attempt_count=runs.c.attempt_count + closed))
    return bool(closed)
