"""What ``schedules apply`` would do, decided from values alone (SPEC §3: drift, ``--dry-run``).

*Drift* is a field a schedule's stored definition changed since its last apply
(``schedules set``, the web page) that the file would now set to something
else: applying would silently undo an operator's edit, so ``apply`` refuses
unless ``--overwrite``. A field edited in the database that the file has since
caught up with is not drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.core.schedule_spec import Schedule, ScheduleSpec
from engine.store import rows


@dataclass(frozen=True)
class FieldChange:
    """One field of one schedule: its value in the database and in the file."""

    field: str
    database: Any
    file: Any

    def describe(self) -> str:
        """One line: the field, its value in the database and in the file."""
        return f"{self.field}: database {self.database!r}, file {self.file!r}"


@dataclass(frozen=True)
class ApplyPlan:
    created: list[str] = field(default_factory=list)
    updated: dict[str, list[FieldChange]] = field(default_factory=dict)
    archived: list[str] = field(default_factory=list)
    drifted: dict[str, list[FieldChange]] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)


def enabled_after_apply(current: Schedule, spec: ScheduleSpec) -> bool:
    """The file's ``enabled``, except that apply never re-enables a schedule disabled from the command line."""
    return spec.enabled and not current.disabled_by_cli


def plan_apply(existing: Mapping[str, Schedule], wanted: Mapping[str, ScheduleSpec]) -> ApplyPlan:
    """Every schedule's fate under ``apply``: created, updated (with field diffs), archived, drifted, unchanged."""
    plan = ApplyPlan()
    for name, known in sorted(existing.items()):
        if name not in wanted and not known.archived:
            plan.archived.append(name)
    for name, spec in sorted(wanted.items()):
        current = existing.get(name)
        if current is None:
            plan.created.append(name)
            continue
        stored, file = rows.definition_of(current.spec), rows.definition_of(spec)
        changes = [FieldChange(k, stored.get(k), file[k]) for k in file if stored.get(k) != file[k]]
        enabled = enabled_after_apply(current, spec)
        if enabled != current.enabled:
            changes.append(FieldChange("enabled", current.enabled, enabled))
        if current.archived:
            changes.append(FieldChange("archived", True, False))
        if not changes:
            plan.unchanged.append(name)
            continue
        plan.updated[name] = changes
        if not current.archived:
            drift = detect_drift(current, spec)
            if drift:
                plan.drifted[name] = drift
    return plan


def detect_drift(current: Schedule, spec: ScheduleSpec) -> list[FieldChange]:
    """Fields edited in the database since the last apply that the file would change again."""
    stored, file = rows.definition_of(current.spec), rows.definition_of(spec)
    applied = current.applied_definition if current.applied_definition is not None else stored
    return [FieldChange(k, stored[k], file.get(k)) for k in stored
            if stored[k] != applied.get(k) and file.get(k) != stored[k]]
