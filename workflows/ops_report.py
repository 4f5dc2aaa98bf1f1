"""``ops_daily_report`` / ``ops_weekly_report``: the engine's own report (SPEC §16.3).

Schedules of these workflows name no project (runs are keyed
``{workflow}:ops:{business_key}``). COLLECT_FACTS reads the engine's record of
the period once (``StepContext.engine_facts``) and persists it, so a retry
writes the same report; WRITE_OPS is deterministic; SAVE_MARKDOWN writes
``reports/_ops/ops/{business_key}-ops-{daily|weekly}-summary.md``; UPLOAD_NOTION
uploads it like a project report when ``[notion]`` is enabled.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from engine.core import errors
from engine.core.models import PeriodKind
from engine.plugins.contract import Degraded, StepContext, StepResult, StepSpec, WorkflowDef
from workflows import providers, report_glue, report_settings
from workflows.report_pins import WriterPins
from workflows.report_settings import ReportSettings

OPS_FOLDER = "_ops"


def collect(ctx: StepContext) -> StepResult:
    return StepResult(output={"facts": dict(ctx.engine_facts(ctx.period_start_at, ctx.period_end_at))})


def write(kind: str, ctx: StepContext) -> StepResult:
    from steps import grounding, ops_markdown

    facts = ctx.outputs["COLLECT_FACTS"]["facts"]
    weekly = kind == "weekly"
    pinned = ctx.pins(WriterPins)
    rules = pinned.text_rules
    if not pinned.ollama:
        text = ops_markdown.render(facts, weekly=weekly, business_key=ctx.business_key, rules=rules)
        return StepResult(output={"text": text, "provider": "builtin"})
    from steps import ops_narrative

    model = pinned.model
    replaces = bool((ctx.previous_output or {}).get("fallback"))
    try:
        checked = ops_narrative.write(facts, partial(_ask, ctx, model), rules)
    except errors.StepError as exc:
        if not report_glue.falls_back(exc, pinned):
            raise
        # The model is unavailable: the built-in report goes out on time, marked, and is written
        # again in place once the model answers (SPEC §15.5).
        text = ops_markdown.render(facts, weekly=weekly, business_key=ctx.business_key,
                                   written_by=f"builtin; **fallback**: ollama `{model}` did not answer; the model "
                                              "writes this report again when it does", rules=rules)
        return StepResult(output={"text": text, "provider": "builtin", "replaces_fallback": replaces,
                                  "fallback": report_glue.fallback_record(exc, f"ollama {model}")},
                          degraded=Degraded(exc.code, f"written by the built-in writer: {exc.message}"))
    note = ("> **Note:** the model's summary failed the checks twice and was replaced by the "
            "built-in one." if checked.verdict == "fallback" else "")
    text = ops_markdown.render(facts, weekly=weekly, business_key=ctx.business_key,
                               summary=checked.text, written_by=f"ollama `{model}`", note=note, rules=rules)
    return StepResult(output={"text": text, "provider": "ollama", "model": model, "replaces_fallback": replaces,
                              "grounding": dict(grounding.record(checked))})


def _ask(ctx: StepContext, model: str, messages: list[dict[str, str]]) -> str:
    """One structured-output chat with the pinned model, retried and mapped as the report writer's
    (``steps.ollama_chat``), one generation per host at a time."""
    from steps import ollama_chat, ops_narrative

    llm = report_glue.settings_of(ctx, ReportSettings).llm
    server = ollama_chat.Server(llm.host, model, sleep=ctx.sleep, timeout_s=llm.timeout.total_seconds(),
                                retry=ollama_chat.RetryPolicy.within(llm.retry_budget.total_seconds()),
                                exclusive=providers.generation_slot(ctx, llm))
    return server.chat(messages, what="ops summary", format=ops_narrative.ModelSummary.model_json_schema(),
                       options=dict(ctx.pins(WriterPins).llm_options))


def save(kind: str, ctx: StepContext[ReportSettings]) -> StepResult:
    from steps import save_markdown

    written = ctx.outputs["WRITE_OPS"]
    front = {"run_id": ctx.run_id, "report_key": ctx.idempotency_key, "business_key": ctx.business_key,
             "workflow": ctx.workflow, "revision": ctx.revision, "provider": written.get("provider")}
    if written.get("grounding"):
        front["grounding"] = written["grounding"]["verdict"]
    if written.get("fallback"):
        front["fallback"] = report_glue.fallback_front(written["fallback"])
    earlier = ctx.previous(save_markdown.SaveOutput) if written.get("replaces_fallback") else None
    return report_glue.save_file(ctx, report_glue.settings_of(ctx, ReportSettings).reports.dir / OPS_FOLDER, "ops",
                                 kind, front, written["text"],
                                 replacing=None if earlier is None else (earlier.path, earlier.sha256))


def upload(kind: str, ctx: StepContext) -> StepResult:
    return report_glue.upload_markdown(ctx, f"operations {kind} report {ctx.business_key}",
                                  ctx.outputs["WRITE_OPS"]["text"])


def _pins(settings: ReportSettings, project: str) -> dict[str, Any]:
    return report_settings.llm_pins(settings).stored()


def ops_workflow(name: str, period: PeriodKind, kind: str) -> WorkflowDef:
    """An ops report workflow of ``period``."""
    return WorkflowDef(
        name=name, period=period, payload_version=1, sections=report_settings.SECTIONS,
        steps=(StepSpec("COLLECT_FACTS", collect, timeout_s=120),
               StepSpec("WRITE_OPS", partial(write, kind), timeout_s=120),
               StepSpec("SAVE_MARKDOWN", partial(save, kind), timeout_s=120,
                        output_model="steps.save_markdown:SaveOutput"),
               StepSpec("UPLOAD_NOTION", partial(upload, kind), timeout_s=600, optional=True,
                        output_model="steps.upload_notion:UploadOutput")),
        load_settings=report_settings.load, pin=_pins, projectless=True, files_root=report_glue.reports_root,
        providers=providers.providers)


DAILY = ops_workflow("ops_daily_report", PeriodKind.DAY, "daily")
WEEKLY = ops_workflow("ops_weekly_report", PeriodKind.WEEK, "weekly")
