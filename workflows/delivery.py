"""DELIVER for the report workflows: which targets a run's report goes to, and its short form, from the context.

The targets are read live (``[[deliveries]]`` entries that name the run's project or team, or its
schedule), each URL from the variable it names, here and nowhere else; the step itself
(``steps.deliver``) gets them typed. The ledger's key is the report's base key (a revision is
the same report: it sends an update, never a second copy); what the report says is the digest of
its text, so a re-run that writes the same text sends nothing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from engine.core import policies
from engine.core.deliveries import MessageKind
from engine.core.models import StepStatus
from engine.plugins.contract import ProbeResult, Provider, StepContext, StepResult, parse_output
from workflows import report_glue
from workflows.report_pins import ReportPins
from workflows.report_settings import DeliverySettings, ReportSettings

if TYPE_CHECKING:
    from steps.delivery_send import Target
    from steps.report_brief import PullRequest

#: The step's name, after UPLOAD_NOTION.
DELIVER = "DELIVER"
#: Error codes that mean a delivery target failed a run (its refusal of a message is not the target's failure).
CODES = frozenset({"DELIVERY_UNAVAILABLE", "DELIVERY_RATE_LIMITED"})
#: A probe's longest wait for a target's address (the doctor's).
PROBE_TIMEOUT_S = 5.0


def entries_for(ctx: StepContext[Any], settings: ReportSettings, *, team: bool) -> list[DeliverySettings]:
    """The ``[[deliveries]]`` entries that send this run's report."""
    schedule = ctx.pins(ReportPins).schedule
    return [entry for entry in settings.deliveries
            if entry.covers(project=None if team else ctx.project, team=ctx.project if team else None,
                            schedule=schedule)]


def targets_of(entries: list[DeliverySettings]) -> list[Target]:
    """Each variable named once, in the order of the file, with the URL it holds now (empty when unset)."""
    from steps.delivery_send import Target

    names = list(dict.fromkeys(name for entry in entries for name in entry.to_env))
    return [Target(name, os.environ.get(name, "")) for name in names]


def _optional(ctx: StepContext[Any], model: type[BaseModel], step: str) -> Any:
    """The output of ``step`` as ``model``, or None when it has none of that shape (skipped, disabled)."""
    found = ctx.outputs.get(step)
    if not found:
        return None
    try:
        return parse_output(model, found, step)
    except Exception:  # noqa: BLE001 - a SKIPPED step's note is not the model
        return None


def pull_requests(ctx: StepContext[Any]) -> list[PullRequest]:
    """The pull requests the run's merges name, linked to the forge when it is known (project reports)."""
    from steps import report_brief
    from steps.collect_git import CollectOutput
    from steps.forge_links import ForgeLinks

    collected = _optional(ctx, CollectOutput, "COLLECT_GIT")
    if collected is None:
        return []
    return report_brief.pull_requests_of(collected.merges, ForgeLinks(ctx.pins(ReportPins).forge).reference)


def deliver_report(ctx: StepContext[Any], *, team: bool = False) -> StepResult:
    """DELIVER: the report's short form to each target of its ``[[deliveries]]``; SKIPPED when none."""
    from steps import deliver, report_brief
    from steps.report_model import ReportOutput
    from steps.save_markdown import SaveOutput
    from steps.upload_notion import UploadOutput

    settings = report_glue.settings_of(ctx, ReportSettings)
    entries = entries_for(ctx, settings, team=team)
    if not entries:
        return StepResult(output={"reason": "no [[deliveries]] entry names this report"}, status=StepStatus.SKIPPED)
    report = ctx.output(ReportOutput)
    page = _optional(ctx, UploadOutput, "UPLOAD_NOTION")
    saved = _optional(ctx, SaveOutput, "SAVE_MARKDOWN")
    link = page.url if page is not None and page.url else saved.location if saved is not None else ""
    found = [] if team else pull_requests(ctx)
    language = ctx.pins(ReportPins).language

    def brief(kind: MessageKind) -> report_brief.Brief:
        return report_brief.compose(report.text, language=language, stats=report.stats, link=link,
                                    page=page is not None and bool(page.url), update=kind is MessageKind.UPDATE,
                                    fallback=report.fallback is not None, pull_requests=found)

    out = deliver.deliver(
        ctx.deliveries, policies.base_key(ctx.workflow, ctx.project, ctx.business_key),
        report_brief.digest(report.text), targets_of(entries), brief, check_fence=ctx.check_fence, sleep=ctx.sleep,
        settings=deliver.Settings(deadline_s=min(e.timeout for e in entries).total_seconds()),
        resend_hint=f"reportflow runs resend {ctx.run_id}")
    return StepResult(output=out)


def providers(settings: ReportSettings) -> tuple[Provider, ...]:
    """The delivery targets of these settings as one provider: a run one of them failed is queued again from
    DELIVER once every target's address answers (the variables' names only: URLs are secrets)."""
    names = sorted({name for entry in settings.deliveries for name in entry.to_env})
    if not names:
        return ()
    return (Provider(name=f"deliveries:{','.join(names)}", label=f"delivery targets ({', '.join(names)})",
                     codes=CODES, probe=lambda: probe(names)),)


def probe(names: list[str]) -> ProbeResult:
    """Every target's variable is set, its URL loads, and its address takes a connection (when it can be told)."""
    from engine.core import errors
    from steps import delivery_send

    for name in names:
        try:
            loaded = delivery_send.load(delivery_send.Target(name, os.environ.get(name, "")))
        except errors.StepError as exc:
            return ProbeResult(False, exc.message)
        down = delivery_send.unreachable(loaded.service, PROBE_TIMEOUT_S)
        if down is not None:
            return ProbeResult(False, f"{name}: {down.split(':')[0]}")
    return ProbeResult(True, f"{len(names)} target(s) answer")
