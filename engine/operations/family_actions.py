"""Operator actions on a family of runs (SPEC §17): cancel propagates, retry re-queues only what failed.

Rows are locked children first, then the parent, in every transaction that
touches both (a finishing child does the same), so two of them never wait for
each other.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime

from sqlalchemy.engine import Connection

from engine.core import logs
from engine.core.models import (
    CANCELLABLE_STATUSES,
    FAILURE_STATUSES,
    PRIORITY,
    AttemptOutcome,
    AttemptTrigger,
    Run,
    RunStatus,
)
from engine.core.run_end import RunEnd
from engine.execution import fan_out
from engine.runtime import Runtime
from engine.store import attempt_rows, audit_rows, families, finish, run_rows

log = logging.getLogger(__name__)

RETRIED_CHILDREN = FAILURE_STATUSES | {RunStatus.CANCELLED}


def cancel_children(conn: Connection, rt: Runtime, parent: Run, now: datetime) -> list[int]:
    """Cancel every unfinished child of ``parent``: a RUNNING one stops at its next step boundary."""
    touched = []
    for child in families.children_of(conn, parent.id):
        if child.status is RunStatus.RUNNING:
            run_rows.request_cancel(conn, child.id)
        elif child.status in CANCELLABLE_STATUSES or child.status is RunStatus.WAITING:
            if child.status is RunStatus.WAITING:  # a grandchild family: cancelled the same way, first
                touched += cancel_children(conn, rt, child, now)
            # The one end of a run (its attempt closed, its parent told); the parent is cancelled next.
            finish.finish_run(conn, child, RunEnd(RunStatus.CANCELLED, AttemptOutcome.CANCELLED, reason="cancelled",
                                                  note=f"its parent run {parent.id} was cancelled"), now, holder=None)
        else:
            continue
        touched.append(child.id)
        audit_rows.record_audit(conn, at=now, actor=rt.actor, action="run_cancelled", run_id=child.id,
                                before={"status": child.status.value}, after={"status": "CANCELLED"},
                                reason=f"parent run {parent.id} cancelled")
    return touched


def retry_children(conn: Connection, rt: Runtime, parent: Run, now: datetime, *,
                   trigger: AttemptTrigger = AttemptTrigger.MANUAL, action: str = "retried") -> list[int] | None:
    """Re-queue the children that did not succeed, then wait for them and run the fan-in.

    What ``runs retry PARENT`` does, and what ``trigger`` and ``backfill`` do when they
    re-queue a parent (its period's run): ``trigger`` is the new attempts' trigger, and
    their priority, for the parent and the children alike. None when the run has no
    finished child to retry (the caller re-queues it as any other run).
    """
    step = parent.pinned.get(fan_out.FAN_OUT_PIN)
    names = rt.workflow(parent.workflow).step_names()
    if step not in names or parent.status not in RETRIED_CHILDREN:
        return None
    again = [c for c in families.children_of(conn, parent.id) if c.status in RETRIED_CHILDREN]
    if not again:
        return None
    budget = rt.config.worker.max_attempts
    for child in again:
        if attempt_rows.close_pending_attempt(conn, child.id, AttemptOutcome.SUPERSEDED, now, "retried with its parent"):
            child = dataclasses.replace(child, attempt_count=child.attempt_count + 1)
        run_rows.requeue(conn, child, trigger=trigger, now=now, fresh_budget=budget)
        audit_rows.record_audit(conn, at=now, actor=rt.actor, action=f"run_{action}", run_id=child.id,
                                before={"status": child.status.value}, after={"status": "QUEUED"},
                                reason=f"{action} with its parent run {parent.id}")
    families.reset_steps_from(conn, parent.id, names.index(str(step)) + 1)
    run_rows.set_status(conn, parent.id, RunStatus.WAITING, completed_at=None, reason=None, error_code=None,
                        error_message=None, cancel_requested=False, not_before=None,
                        priority=PRIORITY[trigger], next_attempt_trigger=trigger.value,
                        max_attempts=parent.attempt_count + budget)
    audit_rows.record_audit(conn, at=now, actor=rt.actor, action=f"run_{action}", run_id=parent.id,
                            schedule_id=parent.schedule_id, before={"status": parent.status.value},
                            after={"status": "WAITING", "children": [c.id for c in again]})
    logs.event(log, logging.INFO, f"run_{action}", run=parent.id, key=parent.idempotency_key,
               children=[c.id for c in again])
    return [c.id for c in again]
