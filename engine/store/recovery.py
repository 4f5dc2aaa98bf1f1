"""Recovery writes: a run whose worker is gone ends (retried or FAILED), and where its next attempt resumes.

The reconciler decides (``policies.decide_recovery``); these functions persist
the decision inside the caller's transaction. A recovery is written as its own
Attempt (trigger ``recovery``, outcome ``pending``) in the same transaction
that closes the lost one, so ``runs show`` lists it at once; the worker that
claims the run continues that attempt (``claims.acquire_run`` upserts it), and an
operator who acts first closes it (``attempt_rows.close_pending_attempt``).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from engine.core.models import AttemptOutcome, AttemptTrigger, Run, RunStatus, StepStatus
from engine.core.policies import RecoveryDecision
from engine.core.run_end import RunEnd
from engine.store import finish
from engine.store.tables import attempts, steps

_DONE = [StepStatus.SUCCESS.value, StepStatus.SKIPPED.value]


def resume_step(conn: Connection, run_id: int) -> str | None:
    """The step a new attempt starts from: the first one not SUCCESS or SKIPPED (None if all are)."""
    query = (select(steps.c.name).where(steps.c.run_id == run_id, steps.c.status.not_in(_DONE))
             .order_by(steps.c.position).limit(1))
    return conn.execute(query).scalar()


def record_recovery(conn: Connection, run: Run, decision: RecoveryDecision, now: datetime, *, reason: str,
                    expired_only: bool = True) -> finish.Finished:
    """Persist a recovery: the run ended (``finish.finish_run``), its lost attempt closed, its running step FAILED.

    Guarded on the run still being RUNNING under the token that was read and,
    with ``expired_only``, on its lease having expired by ``now`` (a worker
    that came back and renewed keeps its run): a failed guard raises
    ``LeaseLost`` and the caller's transaction writes nothing. RETRY_PENDING
    adds the pending recovery attempt (number ``attempt_count + 1``), which
    resumes at the step that was running; FAILED has every after-effect of a
    run's end (the schedule's next run, the parent, the ``run_failed`` alert, which ends with ``reason``).
    """
    retry = decision.status is RunStatus.RETRY_PENDING
    end = RunEnd(decision.status, AttemptOutcome.LOST, error_code=decision.error_code,
                 error_message=decision.error_message, not_before=decision.not_before,
                 next_trigger=AttemptTrigger.RECOVERY if retry else None, reason=reason)
    finished = finish.finish_run(conn, run, end, now, holder=finish.Holder(
        run.fence, run.attempt_count, expired_by=now if expired_only else None))
    conn.execute(update(steps).where(steps.c.run_id == run.id, steps.c.status == StepStatus.RUNNING.value)
                 .values(status=StepStatus.FAILED.value, error_code=decision.error_code,
                         error_message=decision.error_message, finished_at=now))
    if retry:
        conn.execute(insert(attempts).values(
            run_id=run.id, number=run.attempt_count + 1, trigger=AttemptTrigger.RECOVERY.value,
            from_step=resume_step(conn, run.id), outcome=AttemptOutcome.PENDING.value))
    return finished
