"""Workflow discovery: the ``reportflow.workflows`` entry-point group, and the config's ``[[workflows]]``.

A ``[[workflows]]`` entry names a Python file (``path``, relative to the
config file's folder) or a module (``module = "pkg.mod"`` or
``"pkg.mod:ATTR"``). Such a source provides its ``WORKFLOW`` attribute (or the
named one), else every workflow defined at its top level. A workflow is a
``WorkflowDef`` or an ``engine.plugins.authoring.Workflow``. Every workflow gets its ``origin``; a name
given twice, by any two sources, is an error naming both.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from engine.config import config_file, schedule_config
from engine.core import errors
from engine.plugins import authoring
from engine.plugins.contract import WorkflowDef

ENTRY_POINT_GROUP = "reportflow.workflows"

Registry = dict[str, WorkflowDef]


@dataclass(frozen=True)
class Source:
    """One ``[[workflows]]`` entry: ``path`` (already resolved) or ``module``; ``key`` locates it in the config."""

    key: str
    path: Path | None = None
    module: str | None = None


def load_registry(sources: Sequence[Source] = (), *, config_file: str | None = None) -> Registry:
    """Every installed workflow, then those of ``sources``; raises ``ConfigInvalid`` (exit 2) on any problem.

    Installed entry points must name a workflow of the entry point's name.
    """
    registry: Registry = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        workflow = _as_def(ep.load())
        if workflow is None or workflow.name != ep.name:
            raise errors.ReportflowError(f"entry point {ep.name} ({ep.value}) is not a workflow named {ep.name}")
        registry[ep.name] = replace(workflow, origin=f"entry point {ep.name} = {ep.value}")
    for source in sources:
        for workflow in _load_source(source, config_file):
            clash = registry.get(workflow.name)
            if clash is not None:
                raise errors.ConfigInvalid(f"workflow '{workflow.name}' from {workflow.origin} clashes with the "
                                           f"one from {clash.origin}", file=config_file, key=source.key)
            registry[workflow.name] = workflow
    return registry


def load_with_config(config_path: Path, *, db_override: str | None = None,
                     sparing: bool = False) -> tuple[config_file.AppConfig, Registry]:
    """Read ``config_path``, load the installed workflows and its ``[[workflows]]``, then validate it all.

    Every process started with the same config file (CLI, workers, ``serve``)
    sees the same workflows. Raises ``ConfigInvalid`` before anything is written;
    ``sparing``: an invalid ``[[schedules]]`` entry is left out instead (``build_config_sparing``).
    """
    raw = config_file.read_toml(config_path)
    file = str(config_path)
    base_dir = config_path.parent.resolve()
    sources = [Source(key=f"workflows[{index}].{'path' if entry.path is not None else 'module'}",
                      path=(base_dir / entry.path).resolve() if entry.path is not None else None,
                      module=entry.module)
               for index, entry in enumerate(schedule_config.workflow_sources(raw, file))]
    registry = load_registry(sources, config_file=file)
    build = config_file.build_config_sparing if sparing else config_file.build_config
    return build(raw, path=config_path, registry=registry, db_override=db_override), registry


def _as_def(obj: Any) -> WorkflowDef | None:
    if isinstance(obj, WorkflowDef):
        return obj
    if isinstance(obj, authoring.Workflow):
        return obj.definition()
    return None


def _load_source(source: Source, config_file: str | None) -> list[WorkflowDef]:
    attr: str | None = None
    try:
        if source.path is not None:
            origin = f"file {source.path}"
            module = _import_file(source.path)
        else:
            name, _, attr_text = (source.module or "").partition(":")
            attr = attr_text or None
            origin = f"module {source.module}"
            module = importlib.import_module(name)
    except errors.ReportflowError as exc:
        raise errors.ConfigInvalid(exc.message, file=config_file, key=source.key) from exc
    except Exception as exc:  # the user's code failed to import: say where, and what
        raise errors.ConfigInvalid(f"cannot load {origin}: {type(exc).__name__}: {exc}", file=config_file,
                                   key=source.key) from exc
    try:
        found = _workflows_in(module, attr)
    except errors.ReportflowError as exc:
        raise errors.ConfigInvalid(f"{origin}: {exc.message}", file=config_file, key=source.key) from exc
    if not found:
        raise errors.ConfigInvalid(f"{origin} defines no workflow (a WorkflowDef or engine.plugins.authoring.Workflow)",
                                   file=config_file, key=source.key)
    return [replace(workflow, origin=origin) for workflow in found]


def _import_file(path: Path) -> ModuleType:
    """Execute a workflow file as a module of its own (registered in ``sys.modules`` while it runs)."""
    if not path.is_file():
        raise errors.InvalidInput(f"no such file: {path}")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"reportflow_flows.{path.stem.replace('-', '_')}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise errors.InvalidInput(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic resolve annotations through it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _workflows_in(module: ModuleType, attr: str | None) -> list[WorkflowDef]:
    if attr is not None or hasattr(module, "WORKFLOW"):
        name = attr or "WORKFLOW"
        if not hasattr(module, name):
            raise errors.InvalidInput(f"has no attribute {name}")
        workflow = _as_def(getattr(module, name))
        if workflow is None:
            raise errors.InvalidInput(f"{name} is not a workflow")
        return [workflow]
    found: dict[str, WorkflowDef] = {}
    for value in list(vars(module).values()):  # building a definition may add to the module (pydantic generics)
        workflow = _as_def(value) if not isinstance(value, ModuleType) else None
        if workflow is not None:
            found.setdefault(workflow.name, workflow)
    return list(found.values())


def get(registry: Registry, name: str) -> WorkflowDef:
    """The workflow named ``name``; raises NotFound naming the known ones."""
    try:
        return registry[name]
    except KeyError:
        known = ", ".join(sorted(registry)) or "none installed"
        raise errors.InvalidInput(f"unknown workflow '{name}' (known: {known})") from None
