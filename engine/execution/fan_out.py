"""The worker's side of child runs (SPEC §17): a fan-out step's children, and what its fan-in reads.

The rows are built outside the boundary transaction (a workflow's ``pin`` may read
a repository); ``start_children`` inserts them insert-or-nothing inside it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy.engine import Connection

from engine.core import errors, logs
from engine.core.models import NewRun, Run, RunStatus, StepStatus
from engine.plugins.contract import ChildOutcome, ChildRun
from engine.runtime import Runtime
from engine.scheduling import new_runs
from engine.store import families

log = logging.getLogger(__name__)

FAN_OUT_PIN = "fan_out_step"  # pinned on the parent: the step that started its children


def child_rows(rt: Runtime, parent: Run, step: str, started: Sequence[ChildRun]) -> list[NewRun]:
    """The rows of the children ``step`` asked for; an unknown workflow fails the step (permanently)."""
    found: list[NewRun] = []
    if not started:  # every step but a fan-out's: asked after each step
        return found
    now = rt.clock.now()
    for child in started:
        workflow = rt.registry.get(child.workflow)
        if workflow is None:
            raise errors.StepError("CHILD_INVALID", f"step {step} started child '{child.name}' of unknown "
                                   f"workflow '{child.workflow}'", retryable=False)
        project = child.project or parent.project
        try:
            pins = workflow.pin(rt.settings(workflow.name), project)
        except Exception as exc:  # the child fails on its own when it runs; its siblings go on
            logs.event(log, logging.WARNING, "child_not_pinned", run=parent.id, child=child.name,
                       error=errors.first_line(exc))
            pins = {}
        found.append(new_runs.child_run(parent, child, workflow, now=now,
                                        max_attempts=rt.config.worker.max_attempts, workflow_pins=pins))
    return found


def start_children(conn: Connection, parent: Run, rows: Sequence[NewRun]) -> bool:
    """Insert the children that do not exist yet; whether the parent must now wait for any of them."""
    families.insert_children(conn, rows)
    return families.unfinished_children(conn, parent.id) > 0


def not_succeeded(conn: Connection, parent_id: int) -> str:
    """The children of ``parent_id`` that did not succeed, as ``key (STATUS CODE)``, comma-separated."""
    return ", ".join(f"{c.idempotency_key} ({c.status.value}{' ' + c.error_code if c.error_code else ''})"
                     for c in families.children_of(conn, parent_id) if c.status is not RunStatus.SUCCESS)


def outcomes(rt: Runtime, parent_id: int) -> tuple[ChildOutcome, ...]:
    """How each child of ``parent_id`` ended, with its steps' committed outputs (the fan-in's input)."""
    with rt.store.read() as conn:
        children = families.children_of(conn, parent_id, with_outputs=True)
    return tuple(ChildOutcome(
        name=str(child.pinned.get("child") or child.idempotency_key.rpartition("/")[2]), run_id=child.id,
        key=child.idempotency_key, workflow=child.workflow, project=child.project, status=child.status,
        error_code=child.error_code, error_message=child.error_message,
        outputs={s.name: dict(s.output or {}) for s in child.steps if s.output is not None and s.status is StepStatus.SUCCESS},
    ) for child in children)
