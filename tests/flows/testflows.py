"""Workflows used only by tests: four steps that log their executions to a file.

Registered for subprocesses through a generated ``*.dist-info`` folder (the
real entry-point mechanism, see ``tests.flows.install``). Each step appends
``start`` and ``end`` lines to the log named in ``[testflow]``; a step listed
in ``block_on`` waits for ``gate`` to exist (so a test can kill the process
mid-step), and ``fail`` makes a step fail N times (counted in the log).
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
from engine.plugins.contract import ArtifactRef, StepContext, StepResult, StepSpec, WorkflowDef

STEPS = ("ONE", "TWO", "THREE", "FOUR")


class FlowSettings(BaseModel):
    log: str = ""
    gate: str = ""
    block_on: list[str] = []
    block_attempt: int = 1
    fail: dict[str, int] = {}
    fail_code: str = "MODEL_UNAVAILABLE"
    sleep_ms: int = 0
    wait_on: list[str] = []  # these steps wait ``wait_s`` through ``ctx.sleep`` (the engine's clock)
    wait_s: float = 0.0


def load(raw: Mapping[str, Any], base_dir: Path) -> FlowSettings:
    return FlowSettings.model_validate(raw.get("testflow", {}))


def _log(settings: FlowSettings, line: str) -> None:
    if settings.log:
        with open(settings.log, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _count(settings: FlowSettings, prefix: str) -> int:
    if not settings.log or not os.path.exists(settings.log):
        return 0
    with open(settings.log, encoding="utf-8") as fh:
        return sum(1 for line in fh if line.startswith(prefix))


def make_step(name: str) -> Any:
    def step(ctx: StepContext) -> StepResult:
        settings: FlowSettings = ctx.settings
        tag = f"{ctx.run_id} {name}"
        _log(settings, f"start {tag} {os.getpid()} {ctx.attempt}")
        if name in settings.block_on and settings.gate and ctx.attempt == settings.block_attempt:
            clock = SystemClock()
            while not os.path.exists(settings.gate):
                clock.sleep(0.01)
        if name in settings.wait_on:
            ctx.sleep(settings.wait_s)
        if settings.sleep_ms:
            SystemClock().sleep(settings.sleep_ms / 1000)
        failures = settings.fail.get(name, 0)
        if failures and _count(settings, f"fail {tag} ") < failures:
            _log(settings, f"fail {tag} {os.getpid()}")
            raise errors.step_error(settings.fail_code, f"{name} failed on purpose")
        ctx.check_fence()
        _log(settings, f"end {tag} {os.getpid()} {ctx.attempt}")
        seen = {k: v.get("value") for k, v in ctx.outputs.items()}
        return StepResult(output={"value": f"{name}@{ctx.run_id}", "seen": seen, "pid": os.getpid()},
                          artifacts=(ArtifactRef("marker", f"{ctx.idempotency_key}/{name}",
                                                 external_id=str(os.getpid())),))

    return step


FOUR_STEPS = WorkflowDef(
    name="four_steps", period=PeriodKind.SLOT, load_settings=load, sections=("testflow",),
    steps=tuple(StepSpec(n, make_step(n), timeout_s=120, optional=(n == "FOUR")) for n in STEPS),
)
