"""JSON-ready views of runs and schedules, shared by ``--json`` output and the tables."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from engine.config import durations
from engine.core import calendars, deliveries, dependencies, error_codes, healing, policies
from engine.core.clock import format_instant
from engine.core.deliveries import Delivery
from engine.core.models import Run, StepStatus
from engine.core.schedule_spec import Schedule
from engine.plugins.contract import WorkflowDef


def _seconds(delta: timedelta | None) -> float | None:
    return None if delta is None else round(delta.total_seconds(), 3)


def failed_step(run: Run) -> str | None:
    """The name of the run's failed step, if one failed."""
    for step in run.steps:
        if step.status is StepStatus.FAILED:
            return step.name
    return None


def run_summary(run: Run, now: datetime) -> dict[str, Any]:
    """One row of ``runs list --json``; ``stalled`` is ``policies.run_is_stalled`` at ``now``."""
    return {
        "id": run.id,
        "schedule": run.schedule_name,
        "workflow": run.workflow,
        "project": run.project,
        "trigger": run.trigger.value,
        "scheduled_for": format_instant(run.scheduled_for),
        "business_key": run.business_key,
        "idempotency_key": run.idempotency_key,
        "revision": run.revision,
        "status": run.status.value,
        "reason": run.reason,
        "priority": run.priority,
        "attempt_count": run.attempt_count,
        "max_attempts": run.max_attempts,
        "not_before": format_instant(run.not_before),
        "created_at": format_instant(run.created_at),
        "claimed_at": format_instant(run.claimed_at),
        "started_at": format_instant(run.started_at),
        "completed_at": format_instant(run.completed_at),
        "start_delay_s": _seconds(run.start_delay),
        "duration_s": _seconds(run.duration),
        "lease_owner": run.lease_owner,
        "lease_until": format_instant(run.lease_until),
        "error_code": run.error_code,
        "error_message": run.error_message,
        "stalled": policies.run_is_stalled(run, now),
        "parent": run.parent_id,
        "held": run.held,
        "waits_for": wait_view(run),
        "quiet": run.quiet,
        "upstream": upstream_view(run),
    }


def upstream_view(run: Run) -> dict[str, Any] | None:
    """The upstream periods a dependent run waits (or waited) for (SPEC §18); None for a run with no ``after``."""
    if not run.upstream and run.upstream_until is None:
        return None
    return {"periods": [{"schedule": s, "business_key": k} for s, k in run.upstream],
            "until": format_instant(run.upstream_until), "message": dependencies.waiting_for(run)}


def wait_view(run: Run) -> dict[str, Any] | None:
    """What a run waits for (SPEC §15.5) as JSON, with the line a person reads; None when nothing."""
    wait = run.waits_for
    if wait is None:
        return None
    return {"provider": wait.label, "error_code": wait.error_code, "step": wait.step, "degraded": wait.degraded,
            "since": format_instant(wait.since_at), "healthy": wait.healthy,
            "health_since": format_instant(wait.health_since_at), "checked_at": format_instant(wait.checked_at),
            "recoveries": wait.recoveries, "gave_up": wait.gave_up, "message": healing.describe_wait(wait)}


def grounding_of(run: Run) -> dict[str, Any] | None:
    """The verdict a step recorded on what a model wrote (SPEC §16.1), or None."""
    for step in run.steps:
        found = (step.output or {}).get("grounding") if isinstance(step.output, dict) else None
        if isinstance(found, dict) and "verdict" in found:
            return found
    return None


def pinned_rows(pinned: dict[str, Any], heads: dict[str, Any], generation: dict[str, Any]) -> list[tuple[str, Any]]:
    """The run page's "Pinned inputs": each input once, however many places record it.

    A report run pins its branch heads as ``heads`` and ``head_sha`` and COLLECT_GIT's
    output repeats them, as the generation's output repeats the pinned model: one row each.
    """
    raw = pinned.get("heads")
    pinned_heads: dict[str, Any] = raw if isinstance(raw, dict) else {}
    rows: list[tuple[str, Any]] = []
    for key, value in pinned.items():
        if key == "heads" and pinned_heads:
            rows.extend((f"head {ref}", sha) for ref, sha in pinned_heads.items())
        elif not (key == "head_sha" and value in [*pinned_heads.values(), *heads.values()]):
            rows.append((key, value))
    rows.extend((f"head {ref}", sha) for ref, sha in heads.items() if ref not in pinned_heads)
    rows.extend((key, value) for key, value in generation.items() if value is not None and key not in pinned)
    return rows


def run_detail(run: Run, now: datetime) -> dict[str, Any]:
    """A run as ``runs show --json`` and ``/api/runs/ID`` give it."""
    return {
        **run_summary(run, now),
        "pinned": run.pinned,
        "grounding": grounding_of(run),
        "runbook": error_codes.runbook(run.error_code),
        "steps": [{
            "position": s.position, "name": s.name, "status": s.status.value, "attempts": s.attempts,
            "started_at": format_instant(s.started_at), "finished_at": format_instant(s.finished_at),
            "error_code": s.error_code, "error_message": s.error_message, "output": s.output,
        } for s in run.steps],
        "attempts": [{
            "number": a.number, "trigger": a.trigger.value, "from_step": a.from_step, "outcome": a.outcome.value,
            "worker_id": a.worker_id, "started_at": format_instant(a.started_at),
            "finished_at": format_instant(a.finished_at), "error_code": a.error_code,
            "error_message": a.error_message,
        } for a in run.attempts],
        "artifacts": [{"kind": a.kind, "step": a.step, "location": a.location, "sha256": a.sha256,
                       "external_id": a.external_id}
                      for a in run.artifacts],
        "children": [{"id": c.id, "key": c.idempotency_key, "project": c.project, "status": c.status.value}
                     for c in run.children],
        "deliveries": [delivery_view(run, d) for d in run.deliveries],
    }


def delivery_view(run: Run, delivery: Delivery) -> dict[str, Any]:
    """One delivery target of a run's report (its variable's name, never its URL), and the command that sends it
    again when it is unconfirmed or failed."""
    again = delivery.state in deliveries.RESENDABLE
    return {"target": delivery.target, "state": delivery.state.value, "kind": delivery.kind.value,
            "attempts": delivery.attempts, "run_id": delivery.run_id, "error": delivery.error,
            "updated_at": format_instant(delivery.updated_at), "sent_at": format_instant(delivery.sent_at),
            "resend": f"reportflow runs resend {run.id} --target {delivery.target}" if again else None}


def slo_view(measured: Any) -> dict[str, Any]:
    """Success rate and freshness (SPEC §15.2) as ``schedules show --json`` gives them."""
    return {"success_rate": measured.success_rate, "freshness": measured.freshness,
            "periods_due": measured.periods_due, "fresh_due": measured.fresh_due, "window": f"{measured.window.total_seconds() / 86400:g}d"}


def window_view(window: calendars.MaintenanceWindow) -> dict[str, Any]:
    """A maintenance window (or a pause) as JSON."""
    return {"start": format_instant(window.start), "end": format_instant(window.end), "reason": window.reason,
            "schedules": list(window.schedules) or None, "paused": window.paused}


def schedule_view(schedule: Schedule, last: Run | None = None, measured: Any = None,
                  maintenance: Sequence[calendars.MaintenanceWindow] = ()) -> dict[str, Any]:
    """A schedule (and its last run, its success rate and freshness when measured, and its maintenance windows
    not over yet) as JSON."""
    spec = schedule.spec
    zone = ZoneInfo(spec.timezone)
    return {**({} if measured is None else slo_view(measured)),
            "calendar": spec.calendar, "holidays": list(spec.holidays),
            "paused_until": format_instant(schedule.paused_until), "pause_reason": schedule.pause_reason,
            "maintenance": [window_view(w) for w in maintenance],
            "criticality": spec.criticality.value, "priority": spec.priority.value,
            "deadline_s": None if spec.deadline is None else int(spec.deadline.total_seconds()),
            "freshness_target": spec.freshness_target,
            # What else decides whether and when a run happens (dependencies, start_by, recovery).
            "after": list(spec.after), "after_window": durations.text(spec.after_window),
            "on_upstream": spec.on_upstream.value,
            "sprint": None if spec.sprint is None else {"length": f"{spec.sprint.days}d",
                                                        "anchor": spec.sprint.anchor.isoformat()},
            "start_by": None if spec.start_by is None else durations.text(spec.start_by),
            "auto_recover": spec.auto_recover, "auto_recover_daily": spec.auto_recover_daily, **{
        "id": schedule.id,
        "name": spec.name,
        "workflow": spec.workflow,
        "project": spec.project,
        "cron": spec.cron,
        "timezone": spec.timezone,
        "report_on": spec.report_on.value,
        "overlap": spec.overlap.value,
        "misfire": spec.misfire.value,
        "grace_s": int(spec.grace.total_seconds()),
        "catchup_window_s": int(spec.catchup_window.total_seconds()),
        "max_runtime_s": int(spec.max_runtime.total_seconds()),
        "jitter_s": int(spec.jitter.total_seconds()),
        "dst_gap": spec.dst_gap.value,
        "dst_fold": spec.dst_fold.value,
        "allow_frequent": spec.allow_frequent,
        "enabled": schedule.enabled,
        "archived": schedule.archived,
        "disabled_reason": schedule.disabled_reason,
        "version": schedule.version,
        "next_run_at": format_instant(schedule.next_run_at),
        "next_run_local": schedule.next_run_at.astimezone(zone).isoformat() if schedule.next_run_at else None,
        "last_run": None if last is None else {
            "id": last.id, "business_key": last.business_key, "status": last.status.value,
            "scheduled_for": format_instant(last.scheduled_for)},
    }}


def workflow_view(workflow: WorkflowDef) -> dict[str, Any]:
    """A workflow as ``workflows list/show --json`` prints it: period, payload version, steps, origin."""
    return {
        "name": workflow.name,
        "period": workflow.period.value,
        "payload_version": workflow.payload_version,
        "origin": workflow.origin,
        "sections": list(workflow.sections),
        "steps": [{
            "name": step.name,
            "timeout_s": step.timeout_s,
            "optional": step.optional,
            "output_model": step.model_name(),
            "retry_on": sorted(step.retry_on),
            "retry_budget_s": step.retry_budget_s,
        } for step in workflow.steps],
    }


def human_seconds(value: float | None, *, compact: bool = False) -> str:
    """A duration for people: ``850 ms``, ``12.5 s``, ``3.2 min``, ``4.1 h``, ``534.2 d`` (``compact``: ``12.5s``, no ms)."""
    if value is None:
        return ""
    if abs(value) < 1 and not compact:
        return f"{value * 1000:.0f} ms"
    sep = "" if compact else " "
    if abs(value) < 120:
        return f"{value:.1f}{sep}s"
    if abs(value) < 7200:
        return f"{value / 60:.1f}{sep}{'m' if compact else 'min'}"
    if abs(value) < 2 * 86400:
        return f"{value / 3600:.1f}{sep}h"
    return f"{value / 86400:.1f}{sep}d"
