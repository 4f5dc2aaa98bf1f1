"""Drift, decided without a database (SPEC §3)."""

from __future__ import annotations

import dataclasses

from engine.core.schedule_spec import Schedule, ScheduleSpec
from engine.scheduling import drift
from engine.store import rows

APPLIED = ScheduleSpec(name="cd", workflow="echo", project="p", cron="30 19 * * *", timezone="UTC")


def _stored(spec: ScheduleSpec, *, applied: ScheduleSpec | None = APPLIED, **state: object) -> Schedule:
    values: dict[str, object] = {"enabled": True, **state}
    return Schedule(id=1, spec=spec, version=2, archived=False, next_run_at=None,
                    applied_definition=None if applied is None else rows.definition_of(applied),
                    **values)  # type: ignore[arg-type]


def test_an_edit_the_file_would_undo_is_drift() -> None:
    edited = _stored(dataclasses.replace(APPLIED, cron="0 20 * * *"))
    assert drift.detect_drift(edited, APPLIED) == [drift.FieldChange("cron", "0 20 * * *", "30 19 * * *")]
    plan = drift.plan_apply({"cd": edited}, {"cd": APPLIED})
    assert plan.drifted == {"cd": [drift.FieldChange("cron", "0 20 * * *", "30 19 * * *")]}
    assert plan.updated == {"cd": [drift.FieldChange("cron", "0 20 * * *", "30 19 * * *")]}


def test_a_file_change_alone_or_a_file_that_caught_up_is_not_drift() -> None:
    assert drift.detect_drift(_stored(APPLIED), dataclasses.replace(APPLIED, cron="0 8 * * *")) == []
    edited = _stored(dataclasses.replace(APPLIED, cron="0 20 * * *"))
    assert drift.detect_drift(edited, dataclasses.replace(APPLIED, cron="0 20 * * *")) == []
    # Schedules applied before the applied definition was recorded: their stored one counts as applied.
    assert drift.detect_drift(_stored(dataclasses.replace(APPLIED, cron="0 20 * * *"), applied=None), APPLIED) == []


def test_the_plan_lists_created_archived_and_unchanged_and_keeps_a_cli_disable() -> None:
    gone = dataclasses.replace(APPLIED, name="gone", project="q")
    off = _stored(APPLIED, enabled=False, disabled_by_cli=True)
    plan = drift.plan_apply({"cd": off, "gone": _stored(gone)},
                            {"cd": APPLIED, "new": dataclasses.replace(APPLIED, name="new", project="r")})
    assert (plan.created, plan.archived, plan.unchanged, plan.updated) == (["new"], ["gone"], ["cd"], {})
