"""What the report workflows (project, team and ops reports) share between the engine's context and
their steps: the settings, the report file, the Notion page, and the record of a fallback (the writer's
pins are ``report_settings.llm_pins``). One place, so the three workflows cannot drift apart.

This module reads the environment (the Notion token) for the steps; the steps themselves get typed
inputs and explicit clients. Heavy libraries are imported when a step runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from engine.core import errors, redact
from engine.core.models import StepStatus
from engine.plugins.contract import ArtifactRef, StepContext, StepResult
from workflows.report_pins import WriterPins
from workflows.report_settings import ReportSettings

S = TypeVar("S", bound=ReportSettings)


def settings_of(ctx: StepContext[Any], kind: type[S]) -> S:
    """The run's live settings as ``kind``; ``CONFIG_INVALID`` when the workflow's were not loaded."""
    settings = ctx.settings
    if not isinstance(settings, kind):
        raise errors.step_error("CONFIG_INVALID", f"the {ctx.workflow} workflow's settings are not loaded")
    return settings


def reports_root(settings: ReportSettings | None) -> Path | None:
    """Where the report files lie (the page shows a file only from inside it)."""
    return None if settings is None else Path(settings.reports.dir)


def save_file(ctx: StepContext[Any], folder: Path, name: str, kind: str, front: dict[str, Any], text: str, *,
              replacing: tuple[str, str] | None, team: bool = False, period_once: bool = False) -> StepResult:
    """SAVE_MARKDOWN: ``text`` under ``front`` as the report file of ``name`` in ``folder`` (one artifact,
    unless an identical file was already there)."""
    from steps import save_markdown

    settings = settings_of(ctx, ReportSettings)
    document = save_markdown.render_document(front, text)
    out = save_markdown.save(folder, name, ctx.business_key, kind, ctx.revision, document,
                             on_existing=settings.reports.on_existing, check_fence=ctx.check_fence, team=team,
                             period_once=period_once, replacing=replacing)
    artifacts = () if out.action == "skipped" else (ArtifactRef("markdown", out.location, out.sha256),)
    return StepResult(output=out, artifacts=artifacts)


def upload_markdown(ctx: StepContext[Any], title: str, markdown: str, counts: Mapping[str, int] | None = None) -> StepResult:
    """UPLOAD_NOTION of ``markdown`` as the page ``title``, keyed by the run's report key; ``counts`` fill the
    number properties of those names the database has."""
    from steps import notion_api, upload_notion
    from steps.upload_notion import UploadOutput

    notion = settings_of(ctx, ReportSettings).notion
    if not notion.enabled:
        return StepResult(output={"reason": "notion disabled"}, status=StepStatus.SKIPPED)
    token = os.environ.get(notion.token_env, "")
    if not token:
        raise errors.step_error("NOTION_UNAUTHORIZED",
                                f"the environment variable {notion.token_env} (notion.token_env) is not set")
    client = notion_api.make_client(token, notion.base_url, notion.timeout.total_seconds())
    previous = ctx.previous(UploadOutput)
    try:
        out = upload_notion.upload(
            client, upload_notion.NotionTarget(database_id=notion.database_id,
                                               data_source_id=notion.data_source_id),
            report_key=ctx.idempotency_key, title=title,
            markdown=markdown, counts=counts, stored_page_id=previous.page_id if previous else None,
            check_fence=ctx.check_fence,
            # Requests wait for slots shared by every worker; retry waits are the engine's (ctx.sleep).
            pace=upload_notion.SharedPace(ctx.pace, notion_api.rate_limit_name(token), ctx.sleep),
            retry_wait_max_s=notion.retry_budget.total_seconds())
    except errors.StepError as exc:
        if exc.code != "NOTION_UNAUTHORIZED":
            raise
        # The step cannot know which variable holds the token; the operator needs its name.
        raise errors.step_error(exc.code, f"{exc.message} (token variable: {notion.token_env})") from exc
    finally:
        client.close()
    return StepResult(output=out,
                      artifacts=(ArtifactRef("notion_page", out.url or out.page_id, external_id=out.page_id),))


#: The model's failures a fallback stands in for: unavailable past the step's retries.
FALLBACK_CODES = frozenset({"MODEL_UNAVAILABLE"})


def falls_back(exc: errors.StepError, pinned: WriterPins) -> bool:
    """Whether the built-in writer stands in for the model's failure ``exc``: the run pinned the fallback, and the
    model is unavailable past the step's retries (any other failure is the step's)."""
    return exc.code in FALLBACK_CODES and pinned.fallback == "builtin"


def fallback_record(exc: errors.StepError, model: str) -> dict[str, Any]:
    """What a fallback output records of the failure it stood in for (no secret: URLs are masked)."""
    return {"code": exc.code, "model": model, "message": redact.mask_urls(exc.message)}


def fallback_front(fallback: dict[str, Any]) -> dict[str, Any]:
    """A fallback as the front matter states it: the writer that stood in, for which model, and why."""
    return {"writer": "builtin", "instead_of": fallback.get("model"), "code": fallback.get("code")}
