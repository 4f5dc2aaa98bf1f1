"""COLLECT_GIT's forge view, wired: a project's ``forge`` settings and token to ``steps.forge_view.gather``.

The one place that reads the forge's token (from the variable ``[[projects]] forge.token_env`` names, or the
kind's usual one); the step gets it as a value with the engine's shared pacing (``ctx.pace``) and sleep. The view
is gathered for reports pinned at layout 6 that list their merges, when the range holds something; its result
(read, or missing with a reason) goes into COLLECT_GIT's output, which every later step and retry reads.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from engine.core import errors, inputs
from engine.plugins.contract import Finding, StepContext, StepResult
from workflows.report_pins import ReportPins
from workflows.report_settings import ForgeSettings, ProjectSettings

if TYPE_CHECKING:
    from steps.forge_view import ForgeSource


def source_of(settings: ForgeSettings) -> ForgeSource:
    """The step's view of ``[[projects]] forge`` (Forgejo speaks Gitea's API)."""
    from steps.forge_view import ForgeSource

    return ForgeSource(kind="gitea" if settings.kind == "forgejo" else settings.kind, api=settings.api,
                       repository=settings.repository, token_env=settings.token_env,
                       deadline_s=settings.timeout.total_seconds(), cache_dir=settings.cache_dir)


def with_forge_view(ctx: StepContext, pinned: ReportPins, project: ProjectSettings, result: StepResult) -> StepResult:
    """COLLECT_GIT's ``result`` with the forge's view of its range added (layout 6, a project with ``forge``, a
    report that lists its merges, a range that holds commits); unchanged otherwise."""
    from steps import forge_markdown, forge_view, git_repo, merged
    from steps.collect_git import CollectOutput

    out = result.output
    if (project.forge is None or pinned.layout < forge_markdown.FORGE_LAYOUT or not isinstance(out, CollectOutput)
            or not merged.gathered_for(ctx.workflow, pinned.layout)
            or not (out.commits or out.arrived_late or out.merges)):
        return result
    source = source_of(project.forge)
    web = pinned.forge or git_repo.forge(project.repo)
    token = os.environ.get(source.token_variable(web), "")
    start = inputs.instant(out.since) if out.since else ctx.period_start_at
    end = inputs.instant(out.until) if out.until else ctx.period_end_at
    shas = [c.sha for c in [*out.commits, *out.arrived_late]] + [m.sha for m in out.merges or []]
    view = forge_view.gather(source, web, token, forge_view.span_of(start, end, shas), pace=ctx.pace, sleep=ctx.sleep)
    return dataclasses.replace(result, output=out.model_copy(update={"forge_view": view}))


def check(project: ProjectSettings) -> list[Finding]:
    """``doctor``'s line for a project with ``forge``: which repository on which API is asked, with the token of
    which variable; a problem when no repository can be told or the variable is not set (no request is sent)."""
    from steps import git_repo

    if project.forge is None:
        return []
    source = source_of(project.forge)
    try:
        web = git_repo.forge(project.repo)
    except errors.StepError:  # no repository there: check_project says so
        web = None
    target = source.target(web)
    where = f"project {project.key}: forge"
    if target is None:
        return [Finding("forge", f"{where}: origin names no forge repository: set forge.kind, forge.api and "
                                 "forge.repository", problem=True)]
    variable = source.token_variable(web)
    if not os.environ.get(variable):
        return [Finding("forge", f"{where}: the environment variable {variable} (forge.token_env) is not set: "
                                 "reports will say the forge was not read", problem=True)]
    return [Finding("forge", f"{where}: {target.kind} {target.repository} at {target.api}, token in {variable}")]
