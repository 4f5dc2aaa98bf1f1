"""Settings of the report workflows: ``[reports]``, ``[llm]``, ``[notion]``, ``[[projects]]``.

Destinations, hosts and secrets are read live from here at step time; what
shapes a report's content is pinned into each run (``pins``).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictBool, ValidationError, field_validator, model_validator

from engine.config import defaults
from engine.config.fields import KEY_PATTERN, Duration, Strict, check_path
from engine.config.problems import problem_from_validation
from engine.core import errors
from steps import report_texts
from workflows.report_pins import ReportPins, WriterPins

_BCP47 = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
#: Where the prompt templates live (``steps/prompts/{workflow}.{version}.md``).
PROMPTS_DIR = Path(report_texts.__file__).resolve().parent / "prompts"
PROMPTED = ("daily_report", "weekly_report")
#: Reports of longer periods, written from prompt v4 on (``prompt_versions`` counts the ones every report has).
LATER_PERIODS = ("monthly_report", "quarterly_report", "sprint_report")
LATER_PERIODS_FROM = 4
#: Folders a report never goes to, unless the config itself lives there.


def _check_path_text(value: Path) -> Path:
    check_path(str(value))
    return value


#: A scheme written without ``//`` (``javascript:``, ``data:``): not ``host:port``, whose port is digits.
_BARE_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(?![0-9]+(?:/|$))")


def http_host(value: str) -> str:
    """A provider's address: ``http://`` or ``https://`` (or no scheme, which the clients read as http)."""
    scheme = _SCHEME.match(value)
    if scheme is not None and scheme.group(1).lower() not in ("http", "https"):
        raise ValueError(f"must be an http:// or https:// address, not {scheme.group(1)}://")
    bare = _BARE_SCHEME.match(value)
    if scheme is None and bare is not None and "@" not in value:  # javascript:…, data:…: no host:port
        raise ValueError(f"must be an http:// or https:// address, not {bare.group(1)}:")
    if any(ord(c) < 32 or c.isspace() for c in value):
        raise ValueError("must be an address without spaces or control characters")
    if scheme is None and "@" in value:
        # ``user:password@host:port`` is what the clients read as http; with the scheme written, every mask
        # of a password in a URL (logs, errors, doctor, /api) recognises it.
        return f"http://{value}"
    return value


def prompt_versions() -> list[str]:
    """The prompt versions every report workflow has a template for (``v1``, ``v2``, ...)."""
    found = [{p.name.split(".")[1] for p in PROMPTS_DIR.glob(f"{workflow}.v*.md")} for workflow in PROMPTED]
    return sorted(set.intersection(*found), key=lambda v: int(v[1:]) if v[1:].isdigit() else 0)


class ReportsSettings(Strict):
    dir: Annotated[Path, AfterValidator(_check_path_text)] = Path("reports")
    on_existing: Literal["version", "overwrite", "skip"] = "version"
    # BCP 47; the report (builtin writer, and the prompt from v2 on) is written in it.
    language: str = "en"

    @field_validator("language")
    @classmethod
    def _supported(cls, value: str) -> str:
        """Keep the primary subtag (``ko-KR`` is ``ko``); refuse a language without a catalogue."""
        supported = ", ".join(report_texts.LANGUAGES)
        if not _BCP47.match(value) or report_texts.primary(value) not in report_texts.LANGUAGES:
            raise ValueError(f"unsupported language (supported values: {supported})")
        return report_texts.primary(value)


class LlmSettings(Strict):
    provider: Literal["builtin", "ollama"] = "builtin"
    model: str = "llama3.1:8b"
    host: Annotated[str, AfterValidator(http_host)] = "http://127.0.0.1:11434"
    prompt_version: Annotated[str, Field(pattern=r"^v[0-9]+$")] = "v4"
    timeout: Duration = timedelta(seconds=300)
    temperature: float = Field(default=0.2, ge=0, le=2)
    seed: int = 42
    num_ctx: int = Field(default=8192, ge=512)
    # Waiting spent on in-step retries (SPEC §4: 30 s); longer outages become run-level retries.
    retry_budget: Duration = timedelta(seconds=30)
    # When the model is unavailable past the step's retries: "builtin" saves and uploads the built-in
    # writer's report on time, marked fallback, and writes it again in place once the model answers
    # (SPEC §15.5; what `init` writes); "none" (what a config that names nothing keeps) fails the step.
    fallback: Literal["builtin", "none"] = "none"
    # Generations the model host runs at once, across every worker sharing the database; a host at a local
    # address (127.0.0.1, localhost) is each node's own, so each node has its own slots (SPEC §13).
    slots: int = Field(default=1, ge=1, le=64)

    @field_validator("prompt_version")
    @classmethod
    def _prompt_exists(cls, value: str) -> str:
        known = prompt_versions()
        if value not in known:
            raise ValueError(f"no prompt of that version (known: {', '.join(known)})")
        return value


class NotionSettings(Strict):
    enabled: StrictBool = False
    token_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = "NOTION_TOKEN"
    database_id: str = ""
    data_source_id: str = ""
    base_url: Annotated[str, AfterValidator(http_host)] = ""
    timeout: Duration = timedelta(seconds=30)
    retry_budget: Duration = timedelta(seconds=30)

    @model_validator(mode="after")
    def _target(self) -> NotionSettings:
        if self.enabled and not (self.database_id or self.data_source_id):
            raise ValueError("notion is enabled: set database_id or data_source_id")
        return self


#: A loopback address may be asked over plain http (a proxy or a test server on this node); any other only over
#: https, since every request carries the token.
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _forge_api(value: str) -> str:
    """A forge API's base address: https (http only on a loopback address), no credentials in it."""
    if not value:
        return value
    parts = urllib.parse.urlsplit(http_host(value))
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an address with its scheme, e.g. https://git.example.com/api/v4")
    if parts.username or parts.password:
        raise ValueError("must hold no user or password: the token comes from the variable token_env names")
    if parts.scheme.lower() != "https" and parts.hostname not in _LOOPBACK:
        raise ValueError("must be an https:// address (http:// only on a loopback address): it carries the token")
    return value.rstrip("/")


def _forge_path(value: str) -> str:
    """A repository's path on its forge: ``owner/name`` (GitLab: ``group/sub/name``), no ``.`` or ``..`` part."""
    parts = value.split("/")
    if value and (len(parts) < 2 or any(not re.fullmatch(r"[A-Za-z0-9._-]+", p) or p in (".", "..") for p in parts)):
        raise ValueError("must be the repository's path on the forge, e.g. acme/shop")
    return value


class ForgeSettings(Strict):
    """``[[projects]] forge``: the forge whose merged pull requests and closed issues a report holds (layout 6).
    A field left out is derived from ``origin``: the kind from its host, the API from the kind, the repository from
    its path, the token's variable from the kind (``GITHUB_TOKEN``, ``GITLAB_TOKEN``, ``GITEA_TOKEN``)."""

    kind: Literal["github", "gitlab", "gitea", "forgejo"] | None = None
    api: Annotated[str, AfterValidator(_forge_api)] = ""
    repository: Annotated[str, AfterValidator(_forge_path), Field(max_length=300)] = ""
    token_env: Annotated[str, Field(pattern=r"^$|^[A-Za-z_][A-Za-z0-9_]*$")] = ""
    # Each request ends within it, its answer included (a reading sends at most 50: ``forge_api.MAX_REQUESTS``).
    timeout: Duration = timedelta(seconds=10)
    # The ETag cache (``steps.forge_cache``), resolved against the config's folder.
    cache_dir: Annotated[Path, AfterValidator(_check_path_text)] = Path(".reportflow/forge-cache")


def _folder(value: str) -> str:
    from steps import subprojects

    return subprojects.normalise(value)


def _check_kinds(value: dict[str, list[str]]) -> dict[str, list[str]]:
    from steps import change_kinds

    change_kinds.check_rules(value)
    return value


class ProjectSettings(Strict):
    key: Annotated[str, Field(pattern=KEY_PATTERN, max_length=64)]
    repo: Annotated[Path, AfterValidator(_check_path_text)] = Path(".")
    branches: Annotated[list[str], Field(min_length=1)] = ["HEAD"]
    authors: list[str] = []
    on_empty: Literal["skip", "report"] = "skip"
    include_merges: StrictBool = False
    # Globs of paths left out of statistics, beside what .gitattributes marks linguist-generated/vendored.
    exclude: list[Annotated[str, Field(min_length=1)]] = []
    # Bot accounts (author names or e-mails) kept apart from authors, beside every "…[bot]".
    bots: list[Annotated[str, Field(min_length=1, max_length=200)]] = []
    # A subject's first words per kind of change, beside the built-in ones (``steps.change_kinds``).
    kinds: Annotated[dict[str, list[str]], AfterValidator(_check_kinds)] = {}
    # Globs of branches (local and remote-tracking, e.g. ["*"] or ["feature/*", "origin/*"]) whose work not merged
    # yet a report lists apart as in progress (``steps.wip_git``); none by default.
    wip_branches: list[Annotated[str, Field(min_length=1, max_length=200)]] = []
    # A sub-project: folders of the repository it keeps (and leaves out), e.g. ["services/api/"] (``steps.subprojects``).
    paths: list[Annotated[str, AfterValidator(_folder)]] = []
    exclude_paths: list[Annotated[str, AfterValidator(_folder)]] = []
    # The forge's view (``ForgeSettings``): none unless set; ``forge = {}`` derives everything from origin.
    forge: ForgeSettings | None = None


class DeliverySettings(Strict):
    """A ``[[deliveries]]`` entry: the reports of one project, team or schedule sent to each target in ``to_env``.

    Each name in ``to_env`` is an environment variable holding one Apprise URL (``slack://``, ``mailto://``...):
    the URL carries a token, so it is read when a report is sent, never written in the file.
    """

    project: Annotated[str, Field(pattern=KEY_PATTERN, max_length=64)] | None = None
    team: Annotated[str, Field(pattern=KEY_PATTERN, max_length=64)] | None = None
    schedule: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    to_env: Annotated[list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)]],
                      Field(min_length=1)]
    # One send's deadline (connect, write, answer): a target that dribbles its answer holds nothing longer.
    timeout: Duration = timedelta(seconds=15)

    @model_validator(mode="after")
    def _one_subject(self) -> DeliverySettings:
        named = [name for name in ("project", "team", "schedule") if getattr(self, name) is not None]
        if len(named) != 1:
            raise ValueError("name exactly one of project, team or schedule (whose reports are sent)")
        return self

    def covers(self, *, project: str | None, team: str | None, schedule: str | None) -> bool:
        """Whether this entry sends the reports of a run of ``project`` (or ``team``) by ``schedule``."""
        return ((self.project is not None and self.project == project) or (self.team is not None and self.team == team)
                or (self.schedule is not None and self.schedule == schedule))


class ReportSettings(Strict):
    reports: ReportsSettings = ReportsSettings()
    llm: LlmSettings = LlmSettings()
    notion: NotionSettings = NotionSettings()
    projects: list[ProjectSettings] = []
    deliveries: list[DeliverySettings] = []
    #: ``attribution`` of each report schedule that names one, by ``"{workflow}:{project}"``
    #: (one live schedule per workflow and project); read from ``[[schedules]]`` at load.
    attributions: dict[str, Literal["landed", "authored"]] = {}

    def attribution(self, workflow: str, project: str) -> Literal["landed", "authored"]:
        """How the schedule of ``workflow`` for ``project`` places commits (unnamed: ``authored``)."""
        return self.attributions.get(f"{workflow}:{project}", "authored")

    def project(self, key: str) -> ProjectSettings:
        for project in self.projects:
            if project.key == key:
                return project
        raise errors.ConfigInvalid(f"no [[projects]] entry with key '{key}'")


SECTIONS = ("reports", "llm", "notion", "projects", "deliveries")


def load(raw: Mapping[str, Any], base_dir: Path) -> ReportSettings:
    """Validate the report sections; relative paths resolve against ``base_dir``."""
    subset = {name: raw[name] for name in SECTIONS if name in raw}
    try:
        settings = ReportSettings.model_validate(subset)
    except ValidationError as exc:
        raise problem_from_validation(exc, None) from exc
    if settings.llm.provider == "ollama":
        for index, entry in enumerate(raw.get("schedules", [])):
            workflow = str(entry.get("workflow", "")).removeprefix("team_") if isinstance(entry, Mapping) else ""
            path = PROMPTS_DIR / f"{workflow}.{settings.llm.prompt_version}.md"
            if workflow in LATER_PERIODS and not path.exists():  # newer than the older prompt versions
                raise errors.ConfigInvalid(f"{workflow} has no prompt {settings.llm.prompt_version}; use "
                                           f"prompt_version = \"v{LATER_PERIODS_FROM}\" or later",
                                           key=f"schedules[{index}].workflow")
    keys = [p.key for p in settings.projects]
    for index, key in enumerate(keys):
        if keys.index(key) != index:
            raise errors.ConfigInvalid(f"duplicate project key '{key}'", key=f"projects[{index}].key")
    if (settings.llm.provider == "ollama" and settings.llm.prompt_version == "v1"
            and settings.reports.language != "en"):
        raise errors.ConfigInvalid(f"prompt v1 asks for English only; reports.language = "
                                   f"'{settings.reports.language}' needs prompt_version = \"v2\"",
                                   key="llm.prompt_version")
    check_deliveries(settings, raw)
    reports = settings.reports.model_copy(update={"dir": reports_dir(settings.reports.dir, base_dir)})
    projects = [p.model_copy(update={"repo": (base_dir / p.repo).resolve(), "forge": forge_resolved(p.forge, base_dir, i)})
                for i, p in enumerate(settings.projects)]
    attributions = {f"{s.get('workflow')}:{s.get('project')}": s["attribution"] for s in raw.get("schedules", [])
                    if isinstance(s, Mapping) and s.get("attribution") in ("landed", "authored")}
    llm = settings.llm
    if os.environ.get(NODE_HOST_ENV):  # this node's own model host: the one its workers reach
        try:
            llm = llm.model_copy(update={"host": http_host(os.environ[NODE_HOST_ENV])})
        except ValueError as exc:
            raise errors.ConfigInvalid(f"{NODE_HOST_ENV}: {exc}", key="llm.host") from exc
    return settings.model_copy(update={"reports": reports, "projects": projects, "attributions": attributions,
                                       "llm": llm})


def check_deliveries(settings: ReportSettings, raw: Mapping[str, Any]) -> None:
    """Each ``[[deliveries]]`` entry names a project of the file, or a schedule of it (a team is checked by the team
    workflow, which knows the teams); ConfigInvalid names the entry's key."""
    known = {p.key for p in settings.projects}
    schedules = {s.get("name") for s in raw.get("schedules", []) or [] if isinstance(s, Mapping)}
    for index, entry in enumerate(settings.deliveries):
        if entry.project is not None and entry.project not in known:
            raise errors.ConfigInvalid(f"no [[projects]] entry with key '{entry.project}'",
                                       key=f"deliveries[{index}].project")
        if entry.schedule is not None and entry.schedule not in schedules:
            raise errors.ConfigInvalid(f"no [[schedules]] entry named '{entry.schedule}'",
                                       key=f"deliveries[{index}].schedule")


#: The variable a node sets to name the model host its workers reach, over ``[llm] host`` (one shared file,
#: each node its own Ollama: ``REPORTFLOW_LLM_HOST=http://10.0.0.7:11434``); its pool is that host's.
NODE_HOST_ENV = "REPORTFLOW_LLM_HOST"


def reports_dir(given: Path, base_dir: Path) -> Path:
    """``[reports] dir`` resolved against the config's folder; ConfigInvalid (``reports.dir``) when it is unsafe
    (``defaults.output_dir``): reports are files this process writes, perhaps as root."""
    return defaults.output_dir(given, base_dir, key="reports.dir", meant_for="reports")


def forge_resolved(forge: ForgeSettings | None, base_dir: Path, index: int) -> ForgeSettings | None:
    """A project's ``forge`` with its cache folder resolved against the config's folder (``defaults.output_dir``:
    ConfigInvalid when unsafe)."""
    if forge is None:
        return None
    folder = defaults.output_dir(forge.cache_dir, base_dir, key=f"projects[{index}].forge.cache_dir",
                                 meant_for="the forge's cache")
    return forge.model_copy(update={"cache_dir": folder})


def check_project(settings: ReportSettings, key: str) -> None:
    settings.project(key)


#: The rules of ``steps.untrusted`` a new run is pinned to (the step module stays unimported here):
#: 2 makes the model's text, server error text and audit actors inert too (issue 36); 3 escapes
#: only what a renderer would act on, and links ``#N`` to the forge (issue 34); 4 is inert under
#: Python-Markdown and GitHub's renderer too (entities for ``<`` and ``&``, addresses as code).
TEXT_RULES = 4
#: How a new run's statistics and built-in report are laid out (``ReportInput.layout``): 2 puts
#: areas below source roots, bots apart, and links commits to the forge; 3 gives a weekly its week
#: and a team report its sections per repository and person (issue 34); 4 counts well-known automation
#: accounts (``github-actions``, ``renovate``...) as bots without a ``bots`` entry; 5 names a team file's
#: period once (``team_report.TEAM_NAME_LAYOUT``), says which count the summary and the areas table
#: give (``report_markdown.MAINLY_LAYOUT``) and groups the changes by kind (``steps.change_kinds``); 6 reads the
#: forge's view of a project with ``forge`` (merged pull requests, reviews, closed issues: ``steps.forge_markdown``).
LAYOUT = 6


def llm_pins(settings: ReportSettings) -> WriterPins:
    """The writer's inputs every report pins when its run is created: provider, model, fallback, options,
    and the text rules (``steps.untrusted``)."""
    llm = settings.llm
    return WriterPins(provider=llm.provider, model=llm.model if llm.provider == "ollama" else "builtin",
                      fallback=llm.fallback,
                      llm_options={"temperature": llm.temperature, "seed": llm.seed, "num_ctx": llm.num_ctx},
                      text_rules=TEXT_RULES)


def report_pins(settings: ReportSettings, key: str, *, workflow: str | None = None) -> ReportPins:
    """Everything that shapes a report's content, fixed when the run is created.

    ``workflow``: the report workflow whose schedule's attribution to pin (a team's child
    run takes its parent's instead, with the period: its pins leave it unset).
    """
    project = settings.project(key)
    pinned = ReportPins(
        **llm_pins(settings).model_dump(exclude_unset=True), prompt_version=settings.llm.prompt_version,
        language=settings.reports.language, branches=list(project.branches), authors=list(project.authors), on_empty=project.on_empty,
        include_merges=project.include_merges, exclude=list(project.exclude), layout=LAYOUT, bots=list(project.bots),
        kinds={kind: list(words) for kind, words in project.kinds.items()}, wip_branches=list(project.wip_branches),
        paths=list(project.paths), exclude_paths=list(project.exclude_paths))
    return pinned.model_copy(update={"attribution": settings.attribution(workflow, key)}) if workflow else pinned


def pins(settings: ReportSettings, key: str, *, workflow: str | None = None) -> dict[str, Any]:
    """``report_pins`` as the run stores them."""
    return report_pins(settings, key, workflow=workflow).stored()
