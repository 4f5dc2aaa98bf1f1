"""Workflow discovery through the ``reportflow.workflows`` entry-point group."""

from __future__ import annotations

from importlib.metadata import entry_points

from engine import errors
from engine.workflow import WorkflowDef

ENTRY_POINT_GROUP = "reportflow.workflows"

Registry = dict[str, WorkflowDef]


def load_registry() -> Registry:
    """Load every installed workflow; the entry point's name must match the workflow's."""
    registry: Registry = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        workflow = ep.load()
        if not isinstance(workflow, WorkflowDef) or workflow.name != ep.name:
            raise errors.ReportflowError(f"entry point {ep.name} ({ep.value}) is not a WorkflowDef named {ep.name}")
        registry[ep.name] = workflow
    return registry


def get(registry: Registry, name: str) -> WorkflowDef:
    try:
        return registry[name]
    except KeyError:
        known = ", ".join(sorted(registry)) or "none installed"
        raise errors.InvalidInput(f"unknown workflow '{name}' (known: {known})") from None
