"""Team reports (SPEC §17): one report across several projects, built on child runs.

``team_daily_report`` / ``team_weekly_report`` run for a team: the schedule
itself carries ``projects = [...]`` or ``"*"`` (every ``[[projects]]`` entry,
resolved when the run is created) and optional ``authors``, its ``project``
naming the team; or the schedule names a ``[[teams]]`` entry that does. Steps:

1. ``FAN_OUT``: one ``team_project`` child run per project, which collects
   that project (``COLLECT_GIT``, pinned like a project run) and its statistics.
2. ``GENERATE_REPORT``: an overall summary written from every child's commits
   (the builtin writer or Ollama), then a section per project; a project whose
   child did not succeed is named with its error. The run then ends
   ``PARTIAL_SUCCESS`` (the engine's rule for a fan-in that goes on).
3. ``SAVE_MARKDOWN``: ``reports/_team/{business_key}-{schedule}-{daily|weekly}-summary.md`` (the period
   once: a schedule named ``core-daily`` writes ``{business_key}-core-daily-summary.md``).
4. ``UPLOAD_NOTION``: one page (optional, as for a project report).
5. ``DELIVER``: the short form to the team's ``[[deliveries]]`` targets (``workflows.delivery``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import Field, ValidationError

from engine.config.fields import KEY_PATTERN, Strict
from engine.config.problems import problem_from_validation
from engine.core import errors
from engine.core.models import PeriodKind
from engine.plugins.contract import StepContext, StepResult, StepSpec, WorkflowDef
from workflows import delivery, providers, report, report_glue, report_settings
from workflows.report_pins import ReportPins, TeamPins
from workflows.report_settings import ReportSettings

if TYPE_CHECKING:
    from steps.report_model import WorkflowName
    from steps.report_texts import Texts

PAYLOAD_VERSION = 1
CHILD_WORKFLOW = "team_project"
SECTIONS = (*report_settings.SECTIONS, "teams")


class TeamSettings(Strict):
    key: str = Field(pattern=KEY_PATTERN, max_length=64)
    projects: list[str] | Literal["*"] = "*"
    authors: list[str] = []


class Settings(ReportSettings):
    teams: list[TeamSettings] = []

    def team(self, key: str) -> TeamSettings:
        for team in self.teams:
            if team.key == key:
                return team
        raise errors.ConfigInvalid(f"no team '{key}': give the schedule projects = [...] or \"*\", "
                                   "or add a [[teams]] entry with that key")

    def team_projects(self, key: str) -> list[str]:
        team = self.team(key)
        return [p.key for p in self.projects] if team.projects == "*" else list(team.projects)


#: From this layout a commit two sub-projects share is counted once in the team report, and named as shared.
SHARED_LAYOUT = 5
#: From this layout a team file names its period once (``core-daily``: ``…-core-daily-summary.md``).
TEAM_NAME_LAYOUT = 5
#: A team schedule's name names its report file (``steps.save_markdown.team_report_path``): the project-name rule.
TEAM_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def load(workflow: str, raw: Mapping[str, Any], base_dir: Path) -> Settings:
    """The report sections, plus the teams: ``[[teams]]``, and ``workflow``'s schedules that list ``projects``.

    Checked here rather than at the first run: a team schedule's name (it names the report
    file: lower case, digits, ``-`` and ``_``, 64 characters at most) and its ``project``
    (the team's key, required). Every problem names its key path in the file.
    """
    base = report_settings.load(raw, base_dir)
    declared: list[tuple[Any, tuple[str | int, ...]]] = [
        (entry, ("teams", index)) for index, entry in enumerate(raw.get("teams", []) or [])]
    schedules = raw.get("schedules", [])
    for index, sched in enumerate(schedules if isinstance(schedules, list) else []):
        if not isinstance(sched, Mapping) or sched.get("workflow") != workflow:
            continue
        where = f"schedules[{index}]"
        name = sched.get("name")
        if isinstance(name, str) and not TEAM_NAME.match(name):
            raise errors.ConfigInvalid(f"{name[:80]!r}: a team schedule's name names its report file, so it uses "
                                       "lower-case letters, digits, '-' and '_' (64 characters at most)",
                                       key=f"{where}.name")
        if sched.get("project") is None:
            raise errors.ConfigInvalid("a team schedule names its team in project (e.g. project = \"core\"); "
                                       "none is given", key=f"{where}.project")
        if sched.get("projects") is None:
            continue
        declared = [(t, origin) for t, origin in declared
                    if not (isinstance(t, Mapping) and t.get("key") == sched.get("project"))]
        declared.append(({"key": sched.get("project"), "projects": sched["projects"],
                          "authors": sched.get("authors") or []}, ("schedules", index)))
    teams = []
    for entry, origin in declared:
        try:
            teams.append(TeamSettings.model_validate(entry))
        except ValidationError as exc:
            problem = problem_from_validation(exc, None)
            if origin[0] == "schedules":  # the team came from a schedule: its key is the schedule's project
                field = (problem.key or "").replace("key", "project", 1)
                raise errors.ConfigInvalid(problem.problem, key=f"schedules[{origin[1]}].{field}") from exc
            raise errors.ConfigInvalid(problem.problem,
                                       key=f"teams[{origin[1]}]" + (f".{problem.key}" if problem.key else "")) from exc
    settings = Settings(**{name: getattr(base, name) for name in ReportSettings.model_fields}, teams=teams)
    known = {p.key for p in settings.projects}
    for team, (_entry, origin) in zip(teams, declared, strict=True):
        unknown = [p for p in settings.team_projects(team.key) if p not in known]
        if unknown:
            raise errors.ConfigInvalid(f"team '{team.key}' names projects without a [[projects]] entry: "
                                       f"{', '.join(unknown)}", key=f"{origin[0]}[{origin[1]}].projects")
    # Any team of the file: a [[teams]] entry, or the project of a team schedule of whichever team workflow.
    named = {t.key for t in teams} | {str(s.get("project")) for s in schedules if isinstance(schedules, list)
                                      and isinstance(s, Mapping) and str(s.get("workflow", "")).startswith("team_")}
    for index, entry in enumerate(settings.deliveries):
        if entry.team is not None and entry.team not in named:
            raise errors.ConfigInvalid(f"no team '{entry.team}' ([[teams]], or a team schedule's project)",
                                       key=f"deliveries[{index}].team")
    return settings


def check_team(settings: Settings, key: str) -> None:
    settings.team(key)


def team_pins(workflow: str, settings: Settings, key: str) -> dict[str, Any]:
    """The team's projects and authors, and the writer's inputs, fixed when the run is created."""
    team = settings.team(key)
    return TeamPins(**report_settings.llm_pins(settings).model_dump(exclude_unset=True),
                    projects=settings.team_projects(key), authors=list(team.authors),
                    attribution=settings.attribution(workflow, key), prompt_version=settings.llm.prompt_version,
                    language=settings.reports.language, team_texts=1, layout=report_settings.LAYOUT,
                    bots=sorted({bot for p in settings.team_projects(key) for bot in settings.project(p).bots})
                    ).stored()


def fan_out(ctx: StepContext) -> StepResult:
    pinned = ctx.pins(TeamPins)
    projects = pinned.projects
    for project in projects:
        ctx.start_child(project, CHILD_WORKFLOW, {"authors": pinned.authors}, project=project)
    return StepResult(output={"projects": projects})


def _words(pinned: TeamPins) -> Texts:
    """The catalogue of the team report's own words: the run's language, or English for a run pinned before
    they were translated (``team_texts`` absent), so its re-runs write the same bytes."""
    from steps import report_texts

    return report_texts.texts(pinned.language if pinned.team_texts else "en")


def generate(kind: str, ctx: StepContext) -> StepResult:
    """The overall report from every child's commits, then a section per project (and per person, layout 3)."""
    from steps import generate_report, team_markdown
    from steps.collect_git import CollectOutput
    from steps.report_model import Layout

    children = ctx.children()
    outputs = {c.name: CollectOutput.model_validate(c.outputs["COLLECT_GIT"])
               for c in children if c.succeeded and "COLLECT_GIT" in c.outputs}
    # Each project's commits as its own report would hold them: the window's, then those that arrived late.
    collected = {name: [*out.commits, *out.arrived_late] for name, out in outputs.items()}
    repos = [team_markdown.Repository(c.project, c.succeeded, c.status, c.error_code, c.error_message,
                                      collected.get(c.name, []), (c.outputs.get("STATISTICS") or {}).get("forge"))
             for c in children]
    pinned = ctx.pins(TeamPins)
    layout = pinned.layout
    apart = layout >= 3  # each repository's paths prefixed with its name: never summed across repositories
    every = sorted((commit for r in repos for commit in (team_markdown.repository_paths(r.name, r.commits) if apart
                                                         else r.commits)), key=lambda c: c.authored_at)
    # Sub-projects of one repository share the commits that touch both: counted once overall, and named (layout 5).
    owners: dict[str, list[str]] = {}
    for r in repos:
        for commit in r.commits:
            owners.setdefault(commit.sha, []).append(r.name)
    shared = {sha: names for sha, names in owners.items() if len(names) > 1} if layout >= SHARED_LAYOUT else {}
    if shared:
        first: dict[str, Any] = {}
        for commit in every:
            first.setdefault(commit.sha, commit)
        every = list(first.values())  # in order: each shared commit where it first appears
    # The overall summary is written from every child's commits, as a project report is from its own.
    result = report.generate(ctx, commits=every, prompt=cast("WorkflowName", f"{kind}_report"),
                             on_empty="report", repositories=apart,
                             unreadable=sorted(sha for out in outputs.values() for sha in out.unreadable))
    out = result.output
    assert isinstance(out, generate_report.ReportOutput)
    missing = [r for r in repos if not r.succeeded]
    words = _words(pinned)
    rules = pinned.text_rules
    text = team_markdown.name_missing(out.text.rstrip(), missing, words) if apart else out.text.rstrip()
    lines = [text, "", f"## {words.projects}", ""]
    if missing:
        lines += [f"{words.not_collected}: {', '.join(f'{r.name} ({r.error_code})' for r in missing)}.", ""]
    if shared:
        lines += [words.shared_commits(len(shared), sorted({name for names in shared.values() for name in names})),
                  ""]
    shape = Layout(layout, pinned.bot_names, prefixed=True)
    for repo in repos:
        lines += (team_markdown.repository_section(repo, shape, rules, words) if apart
                  else team_markdown.plain_section(repo, rules, words))
    if apart and pinned.authors:  # a personal report: each person across repositories
        lines += team_markdown.people_sections(repos, rules, words)
    # A fallback (the model was down) is the team report's too: it is written again in place (SPEC §15.5).
    return StepResult(output=out.model_copy(update={"text": "\n".join(lines).rstrip() + "\n"}),
                      degraded=result.degraded)


def save(kind: str, ctx: StepContext[Settings]) -> StepResult:
    from steps.report_model import ReportOutput

    written = ctx.output(ReportOutput)
    pinned = ctx.pins(TeamPins)
    return report_glue.save_file(ctx, report_glue.settings_of(ctx, Settings).reports.dir, str(pinned.schedule),
                                 kind, report.front_matter(ctx, written), written.text,
                                 replacing=report.replacing(ctx, written), team=True,
                                 period_once=pinned.layout >= TEAM_NAME_LAYOUT)


def child_collect(ctx: StepContext) -> StepResult:
    """A project of the team, collected like a project run; the team's authors, if any, filter it."""
    pinned = ctx.pins(ReportPins)
    authors = list(ctx.inputs.get("authors") or pinned.authors)
    result = report.collect(ctx, pinned.model_copy(update={"authors": authors, "on_empty": "report"}))
    return dataclasses.replace(result, skip_remaining=None)


def child_statistics(ctx: StepContext) -> StepResult:
    from steps import report_model
    from steps.collect_git import CollectOutput

    # The forge its commits link to in the team report (pinned from origin, text rules 2 on).
    return StepResult(output={"stats": report_model.compute_stats(ctx.output(CollectOutput).commits),
                              "forge": ctx.pins(ReportPins).forge})


def team_workflow(name: str, period: PeriodKind, kind: str) -> WorkflowDef:
    return WorkflowDef(
        name=name, period=period, payload_version=PAYLOAD_VERSION, sections=SECTIONS,
        steps=(
            StepSpec("FAN_OUT", fan_out, timeout_s=60, inline=True),
            StepSpec(providers.GENERATE_REPORT, partial(generate, kind), timeout_s=1800,
                     output_model="steps.report_model:ReportOutput"),
            StepSpec("SAVE_MARKDOWN", partial(save, kind), timeout_s=120,
                     output_model="steps.save_markdown:SaveOutput"),
            StepSpec("UPLOAD_NOTION", partial(report.upload, kind), timeout_s=600, optional=True,
                     output_model="steps.upload_notion:UploadOutput"),
            StepSpec(delivery.DELIVER, partial(delivery.deliver_report, team=True), timeout_s=300, optional=True,
                     output_model="steps.deliver:DeliverOutput"),
        ),
        load_settings=partial(load, name), check_project=check_team, pin=partial(team_pins, name),
        child_projects=lambda settings, key: settings.team_projects(key),
        files_root=report_glue.reports_root, providers=providers.providers, delivery_step=delivery.DELIVER,
    )


CHILD = WorkflowDef(
    name=CHILD_WORKFLOW, period=PeriodKind.DAY, payload_version=PAYLOAD_VERSION, sections=SECTIONS,
    steps=(StepSpec("COLLECT_GIT", child_collect, timeout_s=600, output_model="steps.collect_git:CollectOutput"),
           StepSpec("STATISTICS", child_statistics, timeout_s=60)),
    load_settings=partial(load, CHILD_WORKFLOW), check_project=report_settings.check_project,
    pin=report_settings.pins,
    can_serve=report.can_serve,
)
DAILY = team_workflow("team_daily_report", PeriodKind.DAY, "daily")
WEEKLY = team_workflow("team_weekly_report", PeriodKind.WEEK, "weekly")
MONTHLY = team_workflow("team_monthly_report", PeriodKind.MONTH, "monthly")
QUARTERLY = team_workflow("team_quarterly_report", PeriodKind.QUARTER, "quarterly")
SPRINT = team_workflow("team_sprint_report", PeriodKind.SPRINT, "sprint")
