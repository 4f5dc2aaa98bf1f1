"""Conversions between table rows and the engine's frozen models."""

from __future__ import annotations

import hashlib
import json
from datetime import date, timedelta
from typing import Any

from sqlalchemy.engine import RowMapping

from engine.core import redact
from engine.core.models import (
    ArtifactRecord,
    AttemptOutcome,
    AttemptRecord,
    AttemptTrigger,
    Run,
    RunStatus,
    RunTrigger,
    StepRecord,
    StepStatus,
)
from engine.core.schedule_spec import (
    Criticality,
    DstFold,
    DstGap,
    Misfire,
    OnUpstream,
    Overlap,
    ReportOn,
    Schedule,
    SchedulePriority,
    ScheduleSpec,
    Sprint,
)

_DURATIONS = ("grace", "catchup_window", "max_runtime", "jitter", "deadline", "start_by", "after_window")
_ENUMS = {"report_on": ReportOn, "overlap": Overlap, "misfire": Misfire, "dst_gap": DstGap, "dst_fold": DstFold,
          "criticality": Criticality, "priority": SchedulePriority, "on_upstream": OnUpstream}
# Left out of a definition at their default, so a schedule stored before they existed keeps its hash.
_OPTIONAL: dict[str, Any] = {"criticality": Criticality.NORMAL, "priority": SchedulePriority.NORMAL,
                             "deadline": None, "start_by": None,
                             "auto_recover": ScheduleSpec.auto_recover,
                             "auto_recover_daily": ScheduleSpec.auto_recover_daily,
                             "freshness_target": None, "calendar": None, "holidays": (), "after": (),
                             "after_window": ScheduleSpec.after_window, "on_upstream": ScheduleSpec.on_upstream,
                             "sprint": None}



def _shown(message: str | None) -> str | None:
    """A stored error message as it may be shown: rows written before masking are masked on the way out."""
    return None if message is None else redact.mask_urls(message)

def definition_of(spec: ScheduleSpec) -> dict[str, Any]:
    """A schedule's definition as JSON (durations in seconds); ``enabled`` is state, not definition."""
    out: dict[str, Any] = {}
    for name in ScheduleSpec.__dataclass_fields__:
        if name == "enabled" or (name in _OPTIONAL and getattr(spec, name) == _OPTIONAL[name]):
            continue
        value = getattr(spec, name)
        if name in _DURATIONS:
            value = int(value.total_seconds())
        elif name in _ENUMS:
            value = value.value
        elif isinstance(value, tuple):
            value = list(value)  # as JSON reads it back, so a stored definition compares equal
        elif isinstance(value, Sprint):
            value = {"anchor": value.anchor.isoformat(), "days": value.days}
        out[name] = value
    return out


def definition_hash(definition: dict[str, Any]) -> str:
    """The sha256 of a schedule definition (drift detection)."""
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()


def spec_from_definition(definition: dict[str, Any], enabled: bool) -> ScheduleSpec:
    """A ``ScheduleSpec`` from its stored JSON definition."""
    values: dict[str, Any] = dict(definition)
    for name in _DURATIONS:
        if values.get(name) is not None:
            values[name] = timedelta(seconds=values[name])
    for name, enum in _ENUMS.items():
        if name in values:
            values[name] = enum(values[name])
    if "holidays" in values:
        values["holidays"] = tuple(values["holidays"])
    if "after" in values:
        values["after"] = tuple(values["after"])
    if values.get("sprint") is not None:
        values["sprint"] = Sprint(date.fromisoformat(values["sprint"]["anchor"]), int(values["sprint"]["days"]))
    return ScheduleSpec(**values, enabled=enabled)


def schedule_from_row(row: RowMapping) -> Schedule:
    """A ``Schedule`` from its row."""
    return Schedule(
        id=row["id"], spec=spec_from_definition(row["definition"], row["enabled"]), version=row["version"],
        enabled=row["enabled"], archived=row["archived"], next_run_at=row["next_run_at"],
        disabled_reason=row["disabled_reason"], disabled_by_cli=row["disabled_by_cli"],
        disabled_at=row["disabled_at"], created_at=row["created_at"], updated_at=row["updated_at"],
        applied_definition=row.get("applied_definition"), paused_from=row.get("paused_from"),
        paused_until=row.get("paused_until"), pause_reason=row.get("pause_reason"),
    )


def step_from_row(row: RowMapping) -> StepRecord:
    """A ``StepRecord`` from its row."""
    return StepRecord(
        run_id=row["run_id"], position=row["position"], name=row["name"], status=StepStatus(row["status"]),
        attempts=row["attempts"], output=row["output"], started_at=row["started_at"],
        finished_at=row["finished_at"], error_code=row["error_code"], error_message=_shown(row["error_message"]),
    )


def attempt_from_row(row: RowMapping) -> AttemptRecord:
    """An ``AttemptRecord`` from its row."""
    return AttemptRecord(
        run_id=row["run_id"], number=row["number"], trigger=AttemptTrigger(row["trigger"]),
        from_step=row["from_step"], outcome=AttemptOutcome(row["outcome"]), worker_id=row["worker_id"],
        started_at=row["started_at"], finished_at=row["finished_at"], error_code=row["error_code"],
        error_message=_shown(row["error_message"]),
    )


def artifact_from_row(row: RowMapping) -> ArtifactRecord:
    """An ``ArtifactRecord`` from its row."""
    return ArtifactRecord(run_id=row["run_id"], kind=row["kind"], step=row["step"], location=row["location"],
                          sha256=row["sha256"], external_id=row["external_id"], created_at=row["created_at"])


def run_from_row(row: RowMapping, *, schedule_name: str | None = None, steps: tuple[StepRecord, ...] = (),
                 attempts: tuple[AttemptRecord, ...] = (), artifacts: tuple[ArtifactRecord, ...] = ()) -> Run:
    """A ``Run`` from its row, with whatever detail the caller loaded."""
    trigger = row["next_attempt_trigger"]
    return Run(
        id=row["id"], schedule_id=row["schedule_id"],
        schedule_name=schedule_name if schedule_name is not None else row.get("schedule_name"),
        workflow=row["workflow"], project=row["project"], trigger=RunTrigger(row["trigger_type"]),
        scheduled_for=row["scheduled_for"], business_key=row["business_key"],
        idempotency_key=row["idempotency_key"], revision=row["revision"], status=RunStatus(row["status"]),
        priority=row["priority"], not_before=row["not_before"], pinned=row["pinned"] or {},
        attempt_count=row["attempt_count"], max_attempts=row["max_attempts"],
        next_attempt_trigger=AttemptTrigger(trigger) if trigger else None,
        reason=row["reason"], lease_owner=row["lease_owner"], lease_until=row["lease_until"],
        fence=row["fence"], cancel_requested=row["cancel_requested"], max_runtime_s=row["max_runtime_s"],
        created_at=row["created_at"], claimed_at=row["claimed_at"], started_at=row["started_at"],
        completed_at=row["completed_at"], error_code=row["error_code"], error_message=_shown(row["error_message"]),
        parent_id=row.get("parent_id"), schedule_priority=row.get("schedule_priority", Run.schedule_priority),
        steps=steps, attempts=attempts, artifacts=artifacts,
        schedule_enabled=row.get("schedule_enabled"),
        upstream=tuple((str(s), str(k)) for s, k in row.get("upstream") or ()), upstream_until=row.get("upstream_until"),
    )
