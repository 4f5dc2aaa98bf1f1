"""The report workflows' schedule drafter (SPEC §16.2): the builtin grammar or the model.

The engine asks a workflow's ``draft_schedule`` for an entry and validates it
itself; which reader runs follows ``[llm] provider``, read live from the settings.
"""

from __future__ import annotations

from engine.core import clock, errors
from engine.plugins.contract import DraftAnswer, DraftRequest, node_name
from workflows import providers
from workflows.report_settings import ReportSettings


def draft(settings: ReportSettings, request: DraftRequest) -> DraftAnswer:
    """The entry ``request.text`` describes; InvalidInput when it cannot be read."""
    projects = [p.key for p in settings.projects]
    from steps import schedule_grammar

    if settings.llm.provider == "ollama":
        from steps import ollama_chat, schedule_model

        hints = {k: v for k, v in (("project", request.project), ("workflow", request.workflow),
                                   ("name", request.name)) if v}
        timeout_s = settings.llm.timeout.total_seconds()
        if request.deadline_s is not None:
            timeout_s = min(timeout_s, request.deadline_s)
        host = settings.llm.host.rstrip("/")
        # The page's drafter answers within its deadline: it waits for no retry; the CLI's retries as a report does.
        retry = (ollama_chat.RetryPolicy(budget_s=0.0, max_attempts=1) if request.deadline_s is not None
                 else ollama_chat.RetryPolicy.within(settings.llm.retry_budget.total_seconds()))
        # A slot of the pool GENERATE_REPORT's generations hold on this model host.
        slot = None if request.slots is None else providers.host_slot(request.slots, settings.llm, node_name())
        try:
            answer = schedule_model.ask(
                settings.llm.host, settings.llm.model, request.text,
                workflows={name: period.value for name, period in request.workflows.items()},
                projects=projects, hints=hints, timeout_s=timeout_s, retry=retry, sleep=clock.REAL.sleep,
                exclusive=slot, options={"temperature": 0, "seed": settings.llm.seed})
        except errors.Conflict as exc:
            raise errors.Conflict(f"ollama at {host} is busy: every generation slot of the host is taken "
                                  f"([llm] slots = {settings.llm.slots}); try again shortly") from exc
        entry = {k: v for k, v in answer.model_dump(exclude={"rationale"}).items() if v is not None}
        # What the model left out is the lossless default; the operator's flags win over what it read.
        entry = {**schedule_grammar.LOSSLESS, **entry, **hints}
        if request.timezone and not entry.get("timezone"):
            entry["timezone"] = request.timezone
        return DraftAnswer(entry, answer.rationale, f"ollama {settings.llm.model}")
    try:
        parsed = schedule_grammar.parse(request.text, projects=projects, project=request.project,
                                        workflow=request.workflow, timezone=request.timezone)
    except schedule_grammar.NotUnderstood as exc:
        raise errors.InvalidInput(str(exc)) from exc
    return DraftAnswer(parsed.entry, parsed.rationale, "builtin grammar")
