"""How much model time a schedule asks for in a month: the median recorded duration of the step its model
server's provider times (``Provider.timed_step``, GENERATE_REPORT for Ollama), times the month's runs.

An estimate shown by ``schedules apply`` and ``schedules draft``, never a refusal. A schedule with history
is estimated from its own generations; a new one from its workflow's (same prompts, same model server).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.engine import Connection

from engine.core import errors, run_counts
from engine.core.schedule_spec import ScheduleSpec
from engine.plugins.contract import WorkflowDef
from engine.store import history_rows, schedule_rows
from engine.store.handle import Store


def estimate(conn: Connection, workflow: WorkflowDef | None, settings: Any, spec: ScheduleSpec,
             per_month: int, schedule_id: int | None = None) -> list[str]:
    """One line per timed provider of ``spec``'s workflow (none for a workflow that asks no model)."""
    if workflow is None:
        return []
    lines = []
    for provider in workflow.providers(settings):
        if provider.timed_step is None:
            continue
        durations = [] if schedule_id is None else history_rows.step_durations(
            conn, spec.workflow, provider.timed_step, schedule_id=schedule_id)
        durations = durations or history_rows.step_durations(conn, spec.workflow, provider.timed_step)
        lines.append(f"{spec.name}: {provider.label}: {run_counts.model_time(durations, per_month)}")
    return lines


def reader(store: Store, registry: Mapping[str, WorkflowDef],
           settings: Callable[[str], Any]) -> Callable[[ScheduleSpec, int], list[str]]:
    """``estimate`` for a schedule that may not be in the store yet (``schedules draft``): one read each."""
    def read(spec: ScheduleSpec, per_month: int) -> list[str]:
        with store.read() as conn:
            try:
                schedule_id: int | None = schedule_rows.get_schedule(conn, spec.name).id
            except errors.NotFound:
                schedule_id = None  # a new schedule: its workflow's generations
            return estimate(conn, registry.get(spec.workflow), settings(spec.workflow), spec, per_month, schedule_id)
    return read
