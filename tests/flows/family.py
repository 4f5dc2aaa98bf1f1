"""A parent workflow that fans out over a list, and its child workflow (tests only).

``fan_parent``: SPLIT starts one ``fan_child`` per item of ``[familyflow] items``
(it may block on ``gate`` after asking for them, so a test can SIGKILL it
mid-fan-out), JOIN reads the children's outcomes (and may block too). ``fan_child``: WORK doubles
its input; an item in ``fail`` fails permanently (GIT_REPO_NOT_FOUND) until the
file ``fixed`` exists; ``block_child`` blocks on ``gate``. Every step appends a
line to ``log``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from engine.core import errors
from engine.core.clock import SystemClock
from engine.core.models import PeriodKind
from engine.plugins.contract import StepContext, StepResult, StepSpec, WorkflowDef


class FamilySettings(BaseModel):
    log: str = ""
    gate: str = ""
    fixed: str = ""
    items: list[str] = []
    fail: list[str] = []
    block_split: bool = False
    block_join: bool = False
    block_child: str = ""


def site_dir(site: Path) -> Path:
    """Register these workflows for subprocesses: a ``*.dist-info`` with entry points in ``site``."""
    info = site / "reportflow_familyflows-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: reportflow-familyflows\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[reportflow.workflows]\nfan_parent = tests.flows.family:FAN_PARENT\n"
                                           "fan_child = tests.flows.family:FAN_CHILD\n")
    return site


def load(raw: Mapping[str, Any], base_dir: Path) -> FamilySettings:
    return FamilySettings.model_validate(raw.get("familyflow", {}))


def _log(settings: FamilySettings, line: str) -> None:
    if settings.log:
        with open(settings.log, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _wait_for_gate(settings: FamilySettings) -> None:
    clock = SystemClock()
    while settings.gate and not os.path.exists(settings.gate):
        clock.sleep(0.01)


def split(ctx: StepContext) -> StepResult:
    settings: FamilySettings = ctx.settings
    for index, item in enumerate(settings.items):
        ctx.start_child(item, "fan_child", {"item": item, "n": index + 1})
    _log(settings, f"split {ctx.run_id} {os.getpid()}")
    if settings.block_split and ctx.attempt == 1:
        _wait_for_gate(settings)
    return StepResult(output={"started": list(settings.items)})


def join(ctx: StepContext) -> StepResult:
    settings: FamilySettings = ctx.settings
    children = ctx.children()
    _log(settings, f"join {ctx.run_id} {os.getpid()}")
    if settings.block_join and ctx.attempt == 2:  # the attempt after the wait: the fan-in
        _wait_for_gate(settings)
    return StepResult(output={
        "done": {c.name: c.outputs.get("WORK", {}).get("double") for c in children if c.succeeded},
        "missing": {c.name: f"{c.status} {c.error_code}" for c in children if not c.succeeded}})


def work(ctx: StepContext) -> StepResult:
    settings: FamilySettings = ctx.settings
    item = str(ctx.inputs["item"])
    _log(settings, f"work {ctx.run_id} {item} {os.getpid()} {ctx.attempt}")
    if item == settings.block_child and ctx.attempt == 1:
        _wait_for_gate(settings)
    if item in settings.fail and not (settings.fixed and os.path.exists(settings.fixed)):
        raise errors.StepError("GIT_REPO_NOT_FOUND", f"no repository for {item}", retryable=False)
    ctx.check_fence()
    return StepResult(output={"double": 2 * int(ctx.inputs["n"])})


FAN_PARENT = WorkflowDef(name="fan_parent", period=PeriodKind.SLOT, load_settings=load, sections=("familyflow",),
                         steps=(StepSpec("SPLIT", split, timeout_s=120), StepSpec("JOIN", join, timeout_s=120)))
FAN_CHILD = WorkflowDef(name="fan_child", period=PeriodKind.SLOT, load_settings=load, sections=("familyflow",),
                        steps=(StepSpec("WORK", work, timeout_s=120),))
