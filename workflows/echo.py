"""``echo``: a one-step ``slot`` workflow that records its inputs.

Used by tests and benchmarks, and a template for new workflows: declare the
period and the steps, keep I/O out of import time.
"""

from __future__ import annotations

from engine.core.models import PeriodKind
from engine.plugins.contract import StepContext, StepResult, StepSpec, WorkflowDef


def record_inputs(ctx: StepContext) -> StepResult:
    """Echo what the engine handed over: enough to check pinning and resumption."""
    return StepResult(output={
        "run_id": ctx.run_id,
        "idempotency_key": ctx.idempotency_key,
        "business_key": ctx.business_key,
        "scheduled_for": ctx.scheduled_for.isoformat(),
        "attempt": ctx.attempt,
        "pinned": dict(ctx.pinned),
    })


WORKFLOW = WorkflowDef(
    name="echo",
    period=PeriodKind.SLOT,
    steps=(StepSpec("ECHO", record_inputs, timeout_s=60, inline=True),),  # CPU only: no hand-off to a step thread
)
