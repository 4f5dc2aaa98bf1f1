"""The report workflows' wiring: four steps, adapted from the engine's context to plain step calls.

Every step declares its pydantic output model: the worker validates it before
the boundary commits, and later steps read it back typed (``ctx.output``).

Live settings and the Notion page go through ``workflows.report_glue`` (shared
with the team and ops reports); the steps themselves get typed inputs and
explicit clients. Heavy libraries (GitPython, ollama, notion-client) are
imported when a step runs, not when the workflow is registered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast
from zoneinfo import ZoneInfo

from engine.core import errors, inputs, policies
from engine.core.models import PeriodKind
from engine.plugins.contract import Degraded, StepContext, StepResult, StepSpec, WorkflowDef
from workflows import delivery, diagnose, drafting, forge_glue, providers, report_glue, report_settings
from workflows.range_pins import RangePins
from workflows.report_pins import ReportPins
from workflows.report_settings import ReportSettings

if TYPE_CHECKING:
    from steps.collect_git import CollectOutput
    from steps.report_model import Coverage, ReportOutput, WorkflowName

PAYLOAD_VERSION = 1


def collect(ctx: StepContext[ReportSettings], pinned: ReportPins | None = None) -> StepResult:
    """COLLECT_GIT: the commits of the run's window, or of its range (``pinned``: a team's child's pins, with the
    team's authors and every window reported)."""
    from steps import collect_git, git_repo

    try:
        project = report_glue.settings_of(ctx, ReportSettings).project(ctx.project)
    except errors.ConfigInvalid as exc:
        raise errors.step_error("CONFIG_INVALID", exc.message) from exc
    pinned = pinned or ctx.pins(ReportPins)
    if pinned.attribution and pinned.schedule:
        return forge_glue.with_forge_view(ctx, pinned, project, coverage_collect(ctx, project.repo, pinned))
    out = collect_git.collect(project.repo, pinned.branches, ctx.period_start_at, ctx.period_end_at,
                              pinned_heads=pinned.heads, authors=pinned.authors, include_merges=pinned.include_merges,
                              exclude=pinned.exclude)
    pins: dict[str, Any] = {} if pinned.heads else {"heads": out.heads, "head_sha": out.head_sha}
    if not pinned.heads and pinned.text_rules >= 2:
        # Where links in the model's text may point: the project's own forge, as origin names it now.
        pins["forge"] = git_repo.forge(project.repo)
    out = with_git_facts(ctx, pinned, project.repo, out, lower=None)
    # A window whose only commits git could not read is not empty: its report says what was left out.
    empty = not out.commits and not out.unreadable
    skip = "no_activity" if empty and pinned.on_empty == "skip" else None
    return forge_glue.with_forge_view(ctx, pinned, project, StepResult(output=out, pins=pins, skip_remaining=skip))


def coverage_collect(ctx: StepContext, repo: Path, pinned: ReportPins) -> StepResult:
    """COLLECT_GIT of a run pinned with an attribution: its range runs between two marks of its line.

    The line is the schedule's timeline for this project (a team report's children share
    their parent's schedule). ``steps.coverage.settle`` decides the range from the marks
    recorded so far and the fates of the periods before this one, and records it under
    the line's compare-and-set; a retry reuses the range it pinned, so it reports the same
    commits.
    """
    from steps import collect_git, coverage, git_history, git_repo

    assert pinned.attribution is not None and pinned.schedule is not None  # collect's test for coming here
    start, end = ctx.period_start_at, ctx.period_end_at
    history: git_history.GitHistory | None = None
    earlier = pinned.range
    if earlier is not None:
        taken = earlier
    else:
        history = git_history.GitHistory(repo, pinned.branches)
        decision = coverage.settle(
            ctx.marks, f"{pinned.schedule}:{ctx.project}", start, end, history=history,
            earlier_periods=partial(ctx.earlier_periods, pinned.schedule, start), report=ctx.business_key,
            check_fence=ctx.check_fence)
        taken = RangePins(
            upper=decision.upper, lower=decision.lower, since=decision.since, until=decision.until,
            covered_by=decision.covered_by, also_covers=list(decision.also_covers),
            excluded=git_history.excluded_heads(repo, decision.excluded) if decision.excluded and not
            decision.covered else [],
            held_later=git_history.shas_held_later(repo, decision.later) if decision.later and not decision.covered else [])
    out = collect_git.collect_between(
        repo, pinned.branches, taken.upper, taken.lower, attribution=pinned.attribution, since=taken.since,
        window_start=start, window_end=end, until=taken.until or end, covered_by=taken.covered_by,
        also_covers=taken.also_covers, excluded=taken.excluded, held_later=taken.held_later,
        authors=pinned.authors, include_merges=pinned.include_merges, exclude=pinned.exclude, history=history)
    out = with_git_facts(ctx, pinned, repo, out, lower=taken.lower if pinned.attribution == "landed" else None)
    pins: dict[str, Any] = {} if earlier is not None else taken.pins(out.head_sha)
    if pins and pinned.text_rules >= 2:  # where links in the model's text may point
        pins["forge"] = git_repo.forge(repo)
    empty = not out.commits and not out.arrived_late and not out.unreadable
    skip = "no_activity" if empty and pinned.on_empty == "skip" else None
    return StepResult(output=out, pins=pins, skip_remaining=skip)


def with_git_facts(ctx: StepContext, pinned: ReportPins, repo: Path, out: CollectOutput, *,
                   lower: dict[str, str] | None) -> CollectOutput:
    """A collect kept to its sub-project (``paths``); a weekly's with last week's figures and the merges of its
    coverage (layout 3), a daily's with its merges and work in progress (layout 5: ``steps.merged``,
    ``steps.wip_git``); others unchanged.

    Last week is read from git at the pinned heads, not from the previous weekly's stored output: that
    output may not exist (the first weekly, a quiet week skipped, a pruned run) or may have been collected
    under other pins, and git at pinned heads gives a retry the same figures.
    """
    from steps import merged, report_model, subprojects, week_facts, week_git, wip_git

    paths, exclude = pinned.paths, pinned.exclude_paths
    if paths or exclude:  # a sub-project: the commits that changed it, with its files only
        out = out.model_copy(update={"commits": subprojects.within(out.commits, paths, exclude),
                                     "arrived_late": subprojects.within(out.arrived_late, paths, exclude)})
    if not merged.gathered_for(ctx.workflow, pinned.layout) or not out.heads:
        return out
    if pinned.wip_branches:  # layout 5: work on other branches, listed apart and never counted
        out = out.model_copy(update={"in_progress": wip_git.in_progress(
            repo, out.heads, pinned.branches, pinned.wip_branches,
            start=inputs.instant(out.since) if out.since else ctx.period_start_at,
            end=inputs.instant(out.until) if out.until else ctx.period_end_at)})
    landed = out.attribution == "landed"
    start, end = ctx.period_start_at, ctx.period_end_at
    merges = [] if out.covered else week_git.merges(repo, out.heads, lower=lower if landed else None,
                             start=inputs.instant(out.since) if out.since else start,
                             end=inputs.instant(out.until) if out.until else end)
    if ctx.workflow != "weekly_report":
        return out.model_copy(update={"merges": merges})
    before = policies.period_of_date(PeriodKind.WEEK, (start.astimezone(ZoneInfo(ctx.timezone)).date()
                                                       - timedelta(days=1)), ctx.timezone)
    commits = week_git.last_week(repo, pinned.branches, out.heads, landed=landed, start=before.start_at,
                                 end=before.end_at, authors=pinned.authors, exclude=pinned.exclude)
    layout = report_model.Layout(pinned.layout, pinned.bot_names)
    return out.model_copy(update={"last_week": week_facts.figures(before.key, commits, layout), "merges": merges})


def generate(ctx: StepContext[ReportSettings], *, commits: list[Any] | None = None, unreadable: Sequence[str] = (),
             prompt: WorkflowName | None = None, on_empty: Literal["skip", "report"] | None = None,
             repositories: bool = False) -> StepResult:
    """GENERATE_REPORT: the report of COLLECT_GIT's commits, or of ``commits`` (a team report's, from its
    children, written with the ``prompt`` workflow's template and ``on_empty``; ``repositories``: their paths
    start with their repository's name)."""
    from steps import generate_report, ollama_chat
    from steps.collect_git import CollectOutput

    settings = report_glue.settings_of(ctx, ReportSettings)
    # ``commits`` and ``unreadable``: a team report's, from its child runs (workflows.team_report).
    collected = ctx.output(CollectOutput) if commits is None else None
    pinned = ctx.pins(ReportPins)
    options = dict(pinned.llm_options)
    inp = generate_report.ReportInput(
        workflow=prompt or cast("WorkflowName", ctx.workflow), project=ctx.project, business_key=ctx.business_key,
        window_start=str(pinned.window_start), window_end=str(pinned.window_end),
        timezone=ctx.timezone, commits=collected.commits if collected is not None else commits or [],
        prompt_version=pinned.prompt_version, on_empty=on_empty or pinned.on_empty, language=pinned.language,
        text_rules=pinned.text_rules, layout=pinned.layout, bots=pinned.bots, kinds=pinned.kinds, roots=pinned.paths,
        coverage=coverage_of(collected),
        last_week=collected.last_week if collected is not None else None,
        merges=collected.merges if collected is not None else None,
        in_progress=collected.in_progress if collected is not None else None,
        forge_view=collected.forge_view if collected is not None else None,
        unreadable=collected.unreadable if collected is not None else list(unreadable),
        forge=pinned.forge, repository_prefixed=repositories)
    writer: Any
    num_ctx = int(options.get("num_ctx", 8192))
    if not pinned.ollama:
        out = generate_report.generate(inp, generate_report.BuiltinWriter(), num_ctx=num_ctx, options=options)
        return StepResult(output=out)
    model = pinned.model
    writer = generate_report.OllamaWriter(
        host=settings.llm.host, model=model, timeout_s=settings.llm.timeout.total_seconds(),
        options=options, exclusive=providers.generation_slot(ctx, settings.llm), sleep=ctx.sleep,
        retry=ollama_chat.RetryPolicy.within(settings.llm.retry_budget.total_seconds()))
    replaces = _replaces_fallback(ctx)
    try:
        out = generate_report.generate(inp, writer, num_ctx=num_ctx, options=options)
    except errors.StepError as exc:
        if not report_glue.falls_back(exc, pinned):
            raise
        # The model is unavailable past the step's retries: the built-in writer's report goes out on time,
        # marked; the engine runs this step again, in place, once the model answers (SPEC §15.5).
        wanted = f"ollama `{model}`"
        out = generate_report.generate(inp, generate_report.BuiltinWriter(), num_ctx=num_ctx, options=options,
                                       fallback_for=wanted)
        out = out.model_copy(update={"fallback": report_glue.fallback_record(exc, f"ollama {model}"),
                                     "replaces_fallback": replaces})
        return StepResult(output=out, degraded=Degraded(exc.code, f"written by the built-in writer: {exc.message}"))
    return StepResult(output=out.model_copy(update={"replaces_fallback": replaces}) if replaces else out)


def _replaces_fallback(ctx: StepContext) -> bool:
    """Whether this step's earlier output (this run's, before it was queued again) was a fallback."""
    return bool((ctx.previous_output or {}).get("fallback"))


def coverage_of(collected: CollectOutput | None) -> Coverage | None:
    """What a report holds, from COLLECT_GIT's output (None for runs pinned without an attribution)."""
    from steps.report_model import Coverage

    if collected is None or collected.attribution is None or collected.since is None:
        return None
    return Coverage(attribution=collected.attribution, since=collected.since, until=collected.window_end
                    if collected.until is None else collected.until, also_covers=collected.also_covers,
                    covered=collected.covered, covered_by=collected.covered_by, arrived_late=collected.arrived_late, rewritten=collected.rewritten)


def front_matter(ctx: StepContext, report: ReportOutput) -> dict[str, Any]:
    """The run's pinned inputs as the file states them: no wall-clock fields (re-runs write identical bytes)."""
    pinned = ctx.pins(ReportPins)
    return {
        "run_id": ctx.run_id,
        "report_key": ctx.idempotency_key,
        "business_key": ctx.business_key,
        "workflow": ctx.workflow,
        "project": ctx.project,
        "revision": ctx.revision,
        "timezone": ctx.timezone,
        "window_start": pinned.window_start,
        "window_end": pinned.window_end,
        "window_start_local": pinned.window_start_local,
        "window_end_local": pinned.window_end_local,
        "heads": pinned.heads or {},
        # What the report holds (runs pinned with an attribution; absent before, so their re-runs write the same bytes).
        **({"attribution": pinned.attribution, **pinned.range_front(taken)} if (taken := pinned.range) is not None else {}),
        "provider": report.provider,
        "model": report.model,
        "model_digest": report.model_digest,
        "prompt_version": report.prompt_version,
        "prompt_sha256": report.prompt_sha256,
        # SPEC §16.1; absent for prompts before v3, so their re-runs write the same bytes.
        **({"grounding": report.grounding["verdict"]} if report.grounding else {}),
        # SPEC §15.5; absent when the pinned writer wrote it, so other re-runs write the same bytes.
        **({"fallback": report_glue.fallback_front(report.fallback)} if report.fallback else {}),
    }


def replacing(ctx: StepContext, report: ReportOutput) -> tuple[str, str] | None:
    """The file this step saved before (path, sha256) when ``report`` replaces a fallback: overwritten in place."""
    from steps.save_markdown import SaveOutput

    earlier = ctx.previous(SaveOutput) if report.replaces_fallback else None
    return None if earlier is None else (earlier.path, earlier.sha256)


def save(kind: str, ctx: StepContext[ReportSettings]) -> StepResult:
    from steps.report_model import ReportOutput

    report = ctx.output(ReportOutput)
    return report_glue.save_file(ctx, report_glue.settings_of(ctx, ReportSettings).reports.dir, ctx.project, kind,
                                 front_matter(ctx, report), report.text, replacing=replacing(ctx, report))


def upload(kind: str, ctx: StepContext) -> StepResult:
    from steps.report_model import ReportOutput

    report = ctx.output(ReportOutput)
    return report_glue.upload_markdown(ctx, f"{ctx.project} {kind} report {ctx.business_key}", report.text,
                                       counts=notion_counts(report.stats))


def notion_counts(stats: Mapping[str, Any] | None) -> dict[str, int]:
    """A report's counts by the Notion number property each fills when the database has it: ``Commits``, and one
    per kind of change in English (``Breaking changes``, ``Features``... layout 5)."""
    from steps.report_texts import texts

    if not stats:
        return {}
    titles = texts("en").kind_titles
    return {"Commits": int(stats.get("commits", 0)),
            **{titles[kind]: int(n) for kind, n in (stats.get("kinds") or {}).items() if kind in titles}}


def can_serve(settings: ReportSettings, project_key: str) -> bool:
    """A node serves a project when its repository is present here (SPEC §13)."""
    try:
        repo = settings.project(project_key).repo
    except errors.ConfigInvalid:
        return False
    return (repo / ".git").exists() or (repo / "HEAD").is_file()


def report_workflow(name: str, period: PeriodKind, kind: str) -> WorkflowDef:
    return WorkflowDef(
        name=name,
        period=period,
        payload_version=PAYLOAD_VERSION,
        sections=report_settings.SECTIONS,
        steps=(
            StepSpec("COLLECT_GIT", collect, timeout_s=600, output_model="steps.collect_git:CollectOutput"),
            StepSpec(providers.GENERATE_REPORT, generate, timeout_s=1800, output_model="steps.report_model:ReportOutput"),
            StepSpec("SAVE_MARKDOWN", partial(save, kind), timeout_s=120,
                     output_model="steps.save_markdown:SaveOutput"),
            StepSpec("UPLOAD_NOTION", partial(upload, kind), timeout_s=600, optional=True,
                     output_model="steps.upload_notion:UploadOutput"),
            StepSpec(delivery.DELIVER, delivery.deliver_report, timeout_s=300, optional=True,
                     output_model="steps.deliver:DeliverOutput"),
        ),
        load_settings=report_settings.load,
        check_project=report_settings.check_project,
        pin=partial(report_settings.pins, workflow=name),
        can_serve=can_serve,
        diagnose=diagnose.diagnose,
        files_root=report_glue.reports_root,
        draft_schedule=drafting.draft,
        providers=providers.providers,
        delivery_step=delivery.DELIVER,
    )
