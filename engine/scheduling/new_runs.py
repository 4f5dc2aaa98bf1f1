"""A new run's row: its period, idempotency key and pinned inputs, fixed at creation.

Whatever shapes the run's result is pinned here (business window, timezone,
schedule version, cron, payload version and the workflow's own pins), so a
retry a day later reproduces the same inputs.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from engine.core import policies
from engine.core.clock import format_instant
from engine.core.cron import timetable
from engine.core.models import PRIORITY, AttemptTrigger, NewRun, Period, Run, RunStatus, RunTrigger, SlotReason
from engine.core.schedule_spec import SCHEDULE_RANK, ReportOn, Schedule, ScheduleSpec
from engine.plugins.contract import ChildRun, WorkflowDef


def pinned_inputs(schedule: Schedule, workflow: WorkflowDef, period: Period,
                  workflow_pins: dict[str, Any], slot_at: datetime | None = None) -> dict[str, Any]:
    """The inputs a run keeps for life: period, window (to the slot for ``current``), versions, and the
    workflow's own pins (``WorkflowDef.pin``), which cannot replace the engine's (``payload_version``...)."""
    spec = schedule.spec
    if slot_at is None:
        window, rule = period, policies.WINDOW_WHOLE_PERIOD
    else:
        window, rule = policies.collect_window(period, slot_at, spec.report_on, previous_slot(spec, slot_at))
    local_start, local_end = window.window_local()
    return {
        **workflow_pins,
        "payload_version": workflow.payload_version,
        "workflow": workflow.name,
        "project": spec.project,
        "schedule": spec.name,
        "schedule_version": schedule.version,
        "cron": spec.cron,
        "timezone": spec.timezone,
        "report_on": spec.report_on.value,
        "business_key": period.key,
        "window_start": format_instant(window.start_at),
        "window_end": format_instant(window.end_at),
        "window_start_local": local_start,
        "window_end_local": local_end,
        "window_rule": rule,
    }


def previous_slot(spec: ScheduleSpec, slot_at: datetime) -> datetime | None:
    """The schedule's slot before ``slot_at`` (the start of an ``interval`` window); None for other windows."""
    if spec.report_on is not ReportOn.INTERVAL:
        return None
    fire = timetable.latest_fire_at_or_before(spec.cron, spec.timezone, slot_at - timedelta(seconds=1),
                                         dst_gap=spec.dst_gap, dst_fold=spec.dst_fold)
    return fire.at if fire is not None else None


def new_run(schedule: Schedule, workflow: WorkflowDef, slot_at: datetime, *, trigger: RunTrigger,
            status: RunStatus, now: datetime, max_attempts: int, workflow_pins: dict[str, Any],
            reason: SlotReason | None = None, revision: int = 1, not_before: datetime | None = None) -> NewRun:
    """A new run for ``slot_at`` (the caller inserts it with ON CONFLICT DO NOTHING)."""
    spec = schedule.spec
    period = policies.business_period(workflow.period, slot_at, spec.timezone, spec.report_on, spec.sprint)
    return NewRun(
        schedule_id=schedule.id, workflow=workflow.name, project=spec.project, trigger=trigger,
        scheduled_for=slot_at, business_key=period.key,
        base_key=policies.base_key(workflow.name, spec.project, period.key),
        idempotency_key=policies.idempotency_key(workflow.name, spec.project, period.key, revision),
        revision=revision, status=status, reason=reason, priority=PRIORITY[AttemptTrigger(trigger.value.lower())],
        schedule_priority=SCHEDULE_RANK[spec.priority], not_before=not_before, pinned=pinned_inputs(schedule, workflow, period, workflow_pins, slot_at),
        max_attempts=max_attempts, max_runtime_s=int(spec.max_runtime.total_seconds()), created_at=now,
    )


def child_key(parent_key: str, name: str) -> str:
    """A child run's idempotency key: ``{parent key}/{child name}`` (SPEC §17)."""
    return f"{parent_key}/{name}"


def child_run(parent: Run, child: ChildRun, workflow: WorkflowDef, *, now: datetime, max_attempts: int,
              workflow_pins: dict[str, Any]) -> NewRun:
    """A child run: the parent's period, trigger and priority, its own workflow and inputs.

    No schedule: a child is the parent's part of the period, never a slot of its own (overlap,
    misfire and the calendar see the parent).
    """
    key = child_key(parent.idempotency_key, child.name)
    project = child.project or parent.project
    inherited = {k: v for k, v in parent.pinned.items() if k in _PERIOD_PINS}
    pinned = {**inherited, "payload_version": workflow.payload_version, "workflow": workflow.name,
              "project": project, "parent_key": parent.idempotency_key, "child": child.name,
              "inputs": dict(child.inputs), **workflow_pins}
    return NewRun(
        workflow=workflow.name, project=project, trigger=parent.trigger, scheduled_for=parent.scheduled_for,
        business_key=parent.business_key, base_key=key, idempotency_key=key, status=RunStatus.QUEUED,
        priority=parent.priority, schedule_priority=parent.schedule_priority, pinned=pinned, max_attempts=max_attempts, max_runtime_s=parent.max_runtime_s,
        created_at=now, parent_id=parent.id,
    )


# What a child takes over from its parent's pins: the business period, never the parent's own inputs.
_PERIOD_PINS = frozenset({"schedule", "schedule_version", "timezone", "report_on", "business_key", "window_start",
                          "window_end", "window_start_local", "window_end_local", "attribution"})
