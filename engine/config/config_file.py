"""``reportflow.toml``: loading, validation and the engine's own sections.

The engine validates ``[store]``, ``[worker]``, ``[notify]``, ``[ui]``,
``[[schedules]]`` and ``[[workflows]]`` (loaded by
``engine.plugins.workflow_registry.load_with_config``); every other top-level section is handed, raw, to the
installed workflows (``WorkflowDef.load_settings``), which own them. Any
problem is reported with the file, the key path and what is wrong, before
anything is written.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from engine.config import backup_config, calendar_config, defaults, durations
from engine.config.defaults import DEFAULT_CONFIG as DEFAULT_CONFIG
from engine.config.defaults import DEFAULT_DB_URL as DEFAULT_DB_URL
from engine.config.defaults import resolve_store_url as resolve_store_url
from engine.core import calendars, concurrency_caps, dependencies, errors, redact
from engine.core.models import (
    Criticality,
    DstFold,
    DstGap,
    Misfire,
    OnUpstream,
    Overlap,
    PeriodKind,
    ReportOn,
    SchedulePriority,
    ScheduleSpec,
    Sprint,
)

KEY_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"

Duration = Annotated[timedelta, BeforeValidator(durations.parse)]
OptionalDuration = Annotated[timedelta | None, BeforeValidator(lambda v: None if v in ("", None) else durations.parse(v))]


_FRESHNESS = re.compile(r"^\s*([0-9]{1,3}(?:\.[0-9]{1,6})?)\s*(%?)\s*(?:within\s+(.+?))?\s*$")


def parse_freshness_target(value: Any) -> tuple[float, timedelta | None]:
    """``0.95``, ``"95%"`` or ``"95% within 30m"``: the share of due periods that should be fresh, and the
    deadline that "fresh" means when the text names one."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{value!r} is not a freshness target (e.g. 0.95, \"95%\" or \"95% within 30m\")")
    within = None
    if isinstance(value, str):
        match = _FRESHNESS.match(value)
        if match is None:
            raise ValueError(f"{value!r} is not a freshness target (e.g. 0.95, \"95%\" or \"95% within 30m\")")
        share = float(match.group(1)) / (100 if match.group(2) else 1)
        if match.group(3):
            within = durations.parse(match.group(3))
    else:
        share = float(value)
    if not 0 < share <= 1:
        raise ValueError(f"{value!r}: a freshness target is a share of periods, above 0 and at most 1 (or 100%)")
    return share, within


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _optional_duration(value: Any) -> timedelta | None:
    return None if value in ("", None) else durations.parse(value)


def check_path(value: str) -> str:
    """A field validator for paths: no NUL, no absurd length or depth (``defaults.path_problem``)."""
    problem = defaults.path_problem(value)
    if problem is not None:
        raise ValueError(f"the path {problem}")
    return value


def check_store_url(value: str) -> str:
    """``[store] url``: a SQLite URL's file must be a usable path (what ``Store.open`` creates)."""
    file = defaults.sqlite_file(value)
    if file is not None:
        check_path(file)
    return value


class StoreConfig(Strict):
    url: Annotated[str, AfterValidator(check_store_url)] = DEFAULT_DB_URL
    retain: Annotated[timedelta | None, BeforeValidator(_optional_duration)] = None  # serve prunes older runs
    retain_max: int = Field(default=5000, ge=1)  # a daily prune that would delete more deletes none (SPEC §15.4)
    backup: backup_config.BackupConfig | None = None  # verified backups on a cron (SQLite), a dump's age (PostgreSQL)

    @field_validator("retain")
    @classmethod
    def _retain_floor(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value < timedelta(days=1):
            raise ValueError("retain must be at least 1d (or \"\" to keep every run)")
        return value


class WorkerConfig(Strict):
    lease: Duration = timedelta(seconds=60)
    max_attempts: int = Field(default=3, ge=1, le=100)
    retry_backoff: Duration = timedelta(minutes=1)
    backfill_concurrency: int = Field(default=1, ge=1, le=1000)
    poll_interval: Duration = timedelta(seconds=1)
    # Runs in flight in one process, each in its own thread (``work --concurrency`` overrides it).
    concurrency: int = Field(default=1, ge=1, le=10)  # the store keeps at most 15 connections
    # With concurrency > 1: step boundaries arriving within this window share one commit; "0s" turns it off.
    group_commit: Duration = timedelta(milliseconds=2)

    @field_validator("group_commit")
    @classmethod
    def _group_commit_bound(cls, value: timedelta) -> timedelta:
        if value > timedelta(milliseconds=100):
            raise ValueError("group_commit must be at most 100ms (every step boundary may wait that long)")
        return value

    @field_validator("lease")
    @classmethod
    def _lease_floor(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=1):
            raise ValueError("lease must be at least 1s (30s or more when several nodes share a database)")
        return value


ENV_NAME = r"^([A-Za-z_][A-Za-z0-9_]*)?$"


class NotifyConfig(Strict):
    """``[notify]``: the NAMES of the variables holding the webhook and Apprise URLs (SPEC §15.1), and the alert timings."""

    webhook_env: Annotated[str, Field(pattern=ENV_NAME)] = ""
    apprise_env: Annotated[str, Field(pattern=ENV_NAME)] = ""
    stuck_after: Duration = timedelta(minutes=30)
    slo_window: Duration = timedelta(days=30)
    # Providers (a model server, Notion...) are probed at most this often by serve and cycle (SPEC §15.5).
    health_every: Duration = timedelta(minutes=5)

    @field_validator("health_every")
    @classmethod
    def _health_floor(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=10):
            raise ValueError("health_every must be at least 10s (each probe is a request to the provider)")
        return value

    @model_validator(mode="after")
    def _webhook_scheme(self) -> NotifyConfig:
        url = os.environ.get(self.webhook_env, "") if self.webhook_env else ""
        if url and not re.match(r"^https?://", url, re.IGNORECASE):
            raise ValueError(f"the variable {self.webhook_env} must hold an http:// or https:// URL")
        return self


class UiConfig(Strict):
    """``[ui]``: where the web page binds, and the NAME of the variable holding its write token."""

    host: str = "127.0.0.1"
    port: int = Field(default=8321, ge=0, le=65535)
    token_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = "REPORTFLOW_UI_TOKEN"
    allowed_hosts: tuple[Annotated[str, Field(pattern=r"^[A-Za-z0-9.\-\[\]:]+$", max_length=255)], ...] = ()
    session_ttl: Duration = timedelta(hours=12)
    secure_cookies: StrictBool = False


class LimitsConfig(Strict):
    """``[limits]``: the creation policy and the concurrency caps (SPEC §18).

    A schedule whose busiest day has more runs than ``warn_runs_per_day`` is shown with a warning
    (``apply``, ``validate``, ``draft``); more than ``max_runs_per_day`` is refused. At most
    ``max_running`` runs RUNNING at once across every process sharing the database, and at most
    ``workflows[NAME]`` of workflow NAME (``[limits.workflows]``); claims enforce both.
    """

    warn_runs_per_day: int = Field(default=48, ge=1)
    max_runs_per_day: int | None = Field(default=None, ge=1)
    max_running: StrictInt | None = Field(default=None, ge=1, le=100_000)
    workflows: dict[Annotated[str, Field(pattern=NAME_PATTERN, max_length=100)],
                    Annotated[StrictInt, Field(ge=1, le=100_000)]] = {}

    def caps(self) -> concurrency_caps.Caps:
        """The caps the claim enforces."""
        return concurrency_caps.Caps(self.max_running, tuple(sorted(self.workflows.items())))


#: The project of a projectless workflow's runs (``{workflow}:ops:{business_key}``).
PROJECTLESS = "ops"


class SprintConfig(Strict):
    """A schedule's sprints: ``length`` whole days (a day to a year), one of them starting on ``anchor``."""

    length: Duration
    anchor: date

    @field_validator("length")
    @classmethod
    def _whole_days(cls, value: timedelta) -> timedelta:
        if value % timedelta(days=1) or not timedelta(days=1) <= value <= timedelta(days=366):
            raise ValueError("a sprint is whole days long, from 1d to 366d (e.g. \"14d\")")
        return value


class ScheduleConfig(Strict):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=100)]
    workflow: str
    # Required, except for a workflow whose schedules name no project (``projectless``).
    project: Annotated[str, Field(pattern=KEY_PATTERN, max_length=64)] | None = None
    cron: str
    timezone: str
    # The defaults are ScheduleSpec's (engine.core.models): one source.
    report_on: ReportOn = ScheduleSpec.report_on
    overlap: Overlap = ScheduleSpec.overlap
    misfire: Misfire = ScheduleSpec.misfire
    grace: Duration = ScheduleSpec.grace
    catchup_window: Duration = ScheduleSpec.catchup_window
    max_runtime: Duration = ScheduleSpec.max_runtime
    jitter: Duration = ScheduleSpec.jitter
    dst_gap: DstGap = ScheduleSpec.dst_gap
    dst_fold: DstFold = ScheduleSpec.dst_fold
    allow_frequent: StrictBool = ScheduleSpec.allow_frequent
    enabled: StrictBool = ScheduleSpec.enabled  # "yes" is a typo, not true
    criticality: Criticality = ScheduleSpec.criticality
    priority: SchedulePriority = ScheduleSpec.priority
    deadline: OptionalDuration = ScheduleSpec.deadline
    start_by: OptionalDuration = ScheduleSpec.start_by
    # Automatic re-queues once the provider that failed a run answers again: per run, and per schedule
    # in any 24 hours (SPEC §15.5); 0 turns them off.
    auto_recover: int = Field(default=ScheduleSpec.auto_recover, ge=0, le=100)
    auto_recover_daily: int = Field(default=ScheduleSpec.auto_recover_daily, ge=0, le=100_000)
    # 0.95, "95%" or "95% within 30m" (the "within" part is the deadline): below it, ``freshness_low``.
    freshness_target: float | None = ScheduleSpec.freshness_target
    # A team report's projects ("*": every [[projects]] entry) and authors (SPEC §17): read by the
    # team workflows from the config, pinned into each run, not part of the schedule's definition.
    projects: list[Annotated[str, Field(pattern=KEY_PATTERN, max_length=64)]] | Literal["*"] | None = None
    authors: list[str] | None = None
    # How a report workflow places commits in its reports: "landed" (what became reachable since the
    # previous report) or "authored" (by author date, plus what arrived late); read and pinned by the
    # report workflows. Unnamed: "authored", what configurations written before it meant.
    attribution: Literal["landed", "authored"] | None = None
    # Holidays: a country ("KR", "US-CA", a table) or a [[calendars]] name, and dates of its own;
    # resolved by build_config (calendar_config.resolve) into the spec's calendar and holidays.
    calendar: calendar_config.CalendarValue | None = None
    holidays: list[date] = []
    # Dependencies (SPEC §18): the schedules whose covering periods must be SUCCESS first.
    after: list[Annotated[str, Field(pattern=NAME_PATTERN, max_length=100)]] = []
    after_window: Duration = ScheduleSpec.after_window
    on_upstream: OnUpstream = ScheduleSpec.on_upstream
    # A sprint workflow's sprints: { length = "14d", anchor = "2026-01-05" } (a day one of them starts on).
    sprint: SprintConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _freshness(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("freshness_target") in (None, ""):
            return data
        share, within = parse_freshness_target(data["freshness_target"])
        data = {**data, "freshness_target": share}
        if within is not None:
            if data.get("deadline") not in (None, "") and durations.parse(data["deadline"]) != within:
                raise ValueError(f"freshness_target says within {durations.text(within)} but deadline is "
                                 f"{data['deadline']}: give one of them")
            data["deadline"] = within
        return data

    def to_spec(self) -> ScheduleSpec:
        """The validated ``[[schedules]]`` entry as the engine's ``ScheduleSpec``."""
        values = {name: getattr(self, name) for name in ScheduleSpec.__dataclass_fields__
                  if name not in ("calendar", "holidays")}
        sprint = None if self.sprint is None else Sprint(self.sprint.anchor, self.sprint.length.days)
        return ScheduleSpec(**{**values, "after": tuple(self.after), "sprint": sprint})


class WorkflowSourceConfig(Strict):
    """One ``[[workflows]]`` entry: a Python file (relative to the config's folder) or a module path."""

    path: Annotated[str, Field(min_length=1), AfterValidator(check_path)] | None = None
    module: Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$")] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> WorkflowSourceConfig:
        if (self.path is None) == (self.module is None):
            raise ValueError("give either path = \"flows/x.py\" or module = \"pkg.mod:WORKFLOW\"")
        return self


def workflow_sources(raw: Mapping[str, Any], file: str | None) -> list[WorkflowSourceConfig]:
    """The validated ``[[workflows]]`` entries of a parsed config (before any workflow is loaded)."""
    try:
        return TypeAdapter(list[WorkflowSourceConfig]).validate_python(raw.get("workflows", []))
    except ValidationError as exc:
        raise problem_from_validation(exc, file, prefix=("workflows",)) from exc


class EngineSections(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    workflows: list[WorkflowSourceConfig] = []
    store: StoreConfig = StoreConfig()
    worker: WorkerConfig = WorkerConfig()
    notify: NotifyConfig = NotifyConfig()
    ui: UiConfig = UiConfig()
    limits: LimitsConfig = LimitsConfig()
    schedules: list[ScheduleConfig] = []
    calendars: list[calendar_config.CalendarEntry] = []
    maintenance: list[calendar_config.MaintenanceEntry] = []


@dataclass(frozen=True)
class AppConfig:
    """The loaded configuration: engine sections, workflow settings, where it came from."""

    path: Path | None
    base_dir: Path
    store_url: str
    worker: WorkerConfig
    notify: NotifyConfig
    schedules: tuple[ScheduleSpec, ...]
    raw: Mapping[str, Any]
    workflow_settings: Mapping[str, Any] = field(default_factory=dict)
    retain: timedelta | None = None
    ui: UiConfig = field(default_factory=UiConfig)
    retain_max: int = 5000
    #: ``[[schedules]]`` entries left out because they are invalid (``build_config_sparing``), each in one line.
    left_out: tuple[str, ...] = ()
    #: ``[store] backup`` resolved against the store (None: not configured).
    backup: backup_config.BackupPlan | None = None
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    #: ``[[maintenance]]`` windows (a schedule's pause is on its row, not here).
    maintenance: tuple[calendars.MaintenanceWindow, ...] = ()

    def schedule(self, name: str) -> ScheduleSpec:
        """The schedule of the config named ``name``; raises NotFound."""
        for spec in self.schedules:
            if spec.name == name:
                return spec
        raise errors.NotFound(f"no schedule named '{name}' in {self.path or 'the configuration'}")


_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def key_path(loc: Sequence[int | str]) -> str:
    """Pydantic's ``('schedules', 0, 'cron')`` as ``schedules[0].cron``.

    The names pydantic gives the members of a union (``list[constrained-str]``,
    ``literal['*']``) are not keys of the file and are left out.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _KEY.match(part):
            out += f".{part}" if out else str(part)
    return out


def _in_own_words(error: Mapping[str, Any]) -> str:
    """A pydantic error as the product says it: never pydantic's sentence, never its URL."""
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    if kind in ("value_error", "assertion_error"):
        return str(error.get("msg", "")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    words = {
        "missing": "is required",
        "extra_forbidden": "unknown key",
        "string_type": "must be a string (in quotes)",
        "string_pattern_mismatch": f"must match {ctx.get('pattern')}",
        "string_too_long": f"must be at most {ctx.get('max_length')} characters",
        "string_too_short": f"must be at least {ctx.get('min_length')} characters",
        "too_short": f"must have at least {ctx.get('min_length')} entries",
        "too_long": f"must have at most {ctx.get('max_length')} entries",
        "int_type": "must be a whole number", "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_type": "must be a number", "float_parsing": "must be a number",
        "bool_type": "must be true or false", "bool_parsing": "must be true or false",
        "greater_than": f"must be greater than {ctx.get('gt')}",
        "greater_than_equal": f"must be at least {ctx.get('ge')}",
        "less_than": f"must be less than {ctx.get('lt')}",
        "less_than_equal": f"must be at most {ctx.get('le')}",
        "literal_error": f"must be one of {ctx.get('expected')}",
        "enum": f"must be one of {ctx.get('expected')}",
        "list_type": "must be a list", "tuple_type": "must be a list", "set_type": "must be a list",
        "dict_type": "must be a table", "model_type": "must be a table", "model_attributes_type": "must be a table",
    }
    return words.get(kind, "is not a valid value")


def problem_from_validation(exc: ValidationError, file: str | None, prefix: Sequence[int | str] = ()) -> errors.ConfigInvalid:
    """The first pydantic error as a ConfigInvalid naming the key path and the bad value, in the product's words."""
    found = exc.errors()
    # A misspelled key shows as the key it should have been "required" and itself "unknown": name the typo.
    first = next((e for e in found if e["type"] == "extra_forbidden"), found[0]) \
        if any(e["type"] == "missing" for e in found) else found[0]
    message = _in_own_words(first)
    if first["type"] == "extra_forbidden":
        missing = [str(e["loc"][-1]) for e in found if e["type"] == "missing" and e["loc"][:-1] == first["loc"][:-1]]
        close = difflib.get_close_matches(str(first["loc"][-1]), missing, n=1, cutoff=0.7)
        message = f"unknown key (did you mean '{close[0]}'?)" if close else "unknown key"
    elif first["loc"] and str(first["loc"][-1]).endswith("_env"):
        message = "must be the NAME of an environment variable, not its value"  # the value may be a secret URL
    elif "input" in first and not isinstance(first["input"], dict | list):
        message = f"{redact.echoed(first['input'])}: {message}"
    return errors.ConfigInvalid(message, file=file, key=key_path([*prefix, *first["loc"]]) or None)


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; an unreadable, oversized, non-regular or malformed one raises ConfigInvalid."""
    data = defaults.read_config_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise errors.ConfigInvalid(f"cannot read: not UTF-8 ({exc.reason} at byte {exc.start})",
                                   file=str(path)) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise errors.ConfigInvalid(f"not valid TOML: {exc}", file=str(path)) from exc
    except RecursionError:
        raise errors.ConfigInvalid("not valid TOML: nested too deeply", file=str(path)) from None


def _check_timing(spec: ScheduleSpec, period: Any) -> None:
    """Cron validation costs ~3 ms; schedules share a few timings, so each distinct one is checked once. The
    cache is keyed by the whole definition but its name and project, so no field the check reads (``report_on``
    was once left out of the key, and its refusal never fired) can be missed."""
    _check_timing_cached(dataclasses.replace(spec, name="", project=""), period)


@lru_cache(maxsize=4096)
def _check_timing_cached(spec: ScheduleSpec, period: Any) -> None:
    from engine.core.cron import validate

    validate.check_schedule(spec, period)


def _policy(spec: ScheduleSpec, warn: int, maximum: int | None) -> Any:
    """The creation policy's verdict on a schedule, over a fixed month (so validity never depends on the clock)."""
    from engine.core import run_counts

    counts = _month_counts(spec.cron, spec.timezone, spec.dst_gap, spec.dst_fold)
    return run_counts.decide(spec.name, counts, warn_per_day=warn, max_per_day=maximum)


@lru_cache(maxsize=4096)
def _month_counts(cron_expr: str, timezone: str, dst_gap: DstGap, dst_fold: DstFold) -> Any:
    from engine.core import run_counts

    # October: the northern hemisphere's clocks go back (dst_fold = "both" doubles an hour), the southern's forward.
    return run_counts.count_month(cron_expr, timezone, date(2026, 10, 1), dst_gap=dst_gap, dst_fold=dst_fold)


ENGINE_SECTIONS = ("store", "worker", "notify", "ui", "limits", "schedules", "workflows", "calendars", "maintenance")


def _refuse_unknown_sections(raw: Mapping[str, Any], registry: Mapping[str, Any], file: str | None) -> None:
    """A misspelled ``[[schedule]]`` must not read as an empty schedule list (and archive them all)."""
    known = set(ENGINE_SECTIONS) | {name for wf in registry.values() for name in getattr(wf, "sections", ())}
    for name in raw:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(sorted(known))})"
            raise errors.ConfigInvalid(f"unknown section{hint}", file=file, key=name)


def _check_dependencies(specs: Sequence[ScheduleSpec], file: str | None) -> None:
    """Refuse an ``after`` naming a schedule the file does not define, and any cycle of ``after``."""
    names = {spec.name: index for index, spec in enumerate(specs)}
    for index, spec in enumerate(specs):
        for upstream in spec.after:
            if upstream not in names:
                raise errors.ConfigInvalid(f"after names '{upstream}', which is not a schedule of this file",
                                           file=file, key=f"schedules[{index}].after")
            if specs[names[upstream]].sprint is not None:
                raise errors.ConfigInvalid(f"after names '{upstream}', a sprint schedule: its periods match no "
                                           "other schedule's", file=file, key=f"schedules[{index}].after")
    cycle = dependencies.find_cycle({spec.name: spec.after for spec in specs})
    if cycle is not None:
        raise errors.ConfigInvalid(f"after makes a cycle: {' -> '.join(cycle)}", file=file,
                                   key=f"schedules[{names[cycle[0]]}].after")


def load_config(path: Path, registry: Mapping[str, Any], *, db_override: str | None = None) -> AppConfig:
    """Load and fully validate ``path``; raise ConfigInvalid before anything is written."""
    return build_config(read_toml(path), path=path, registry=registry, db_override=db_override)


_SCHEDULE_KEY = re.compile(r"^schedules\[(\d+)\]")


def build_config_sparing(raw: Mapping[str, Any], *, path: Path | None, registry: Mapping[str, Any],
                         db_override: str | None = None) -> AppConfig:
    """``build_config``, but an invalid ``[[schedules]]`` entry is left out (named in ``left_out``) instead of
    refusing the file: one bad schedule must not stop the others, nor an operator reading history.

    Anything else that is invalid (a section, a project, the TOML itself) still refuses the file.
    """
    entries = list(raw.get("schedules", []))
    left_out: list[str] = []
    while True:
        try:
            config = build_config({**raw, "schedules": entries}, path=path, registry=registry,
                                  db_override=db_override)
        except errors.ConfigInvalid as exc:
            found = _SCHEDULE_KEY.match(exc.key or "")
            if found is None or int(found.group(1)) >= len(entries):
                raise
            entry = entries.pop(int(found.group(1)))
            name = entry.get("name") if isinstance(entry, Mapping) else None
            left_out.append(f"schedule {name!r} is left out, it is invalid: {exc.message}")
            continue
        return dataclasses.replace(config, left_out=tuple(left_out))


def build_config(raw: Mapping[str, Any], *, path: Path | None, registry: Mapping[str, Any],
                 db_override: str | None = None) -> AppConfig:
    """Validate a parsed config; workflows validate their own sections."""
    file = str(path) if path else None
    base_dir = (path.parent if path else Path.cwd()).resolve()
    _refuse_unknown_sections(raw, registry, file)
    try:
        sections = EngineSections.model_validate(raw)
    except ValidationError as exc:
        raise problem_from_validation(exc, file) from exc

    settings: dict[str, Any] = {}
    for name, workflow in registry.items():
        try:
            settings[name] = workflow.load_settings(raw, base_dir)
        except errors.ConfigInvalid as exc:
            raise errors.ConfigInvalid(exc.problem, file=file, key=exc.key) from exc

    named_calendars = calendar_config.check_entries(sections.calendars, file)
    seen_names: set[str] = set()
    live_pairs: dict[tuple[str, str], str] = {}
    specs: list[ScheduleSpec] = []
    for index, sched in enumerate(sections.schedules):
        where = f"schedules[{index}]"
        if sched.name in seen_names:
            raise errors.ConfigInvalid(f"duplicate schedule name '{sched.name}'", file=file, key=f"{where}.name")
        seen_names.add(sched.name)
        if sched.workflow not in registry:
            known = ", ".join(sorted(registry)) or "none installed"
            raise errors.ConfigInvalid(f"unknown workflow '{sched.workflow}' (known: {known})",
                                       file=file, key=f"{where}.workflow")
        workflow = registry[sched.workflow]
        sprints = workflow.period is PeriodKind.SPRINT
        if sprints and sched.sprint is None:
            raise errors.ConfigInvalid(f"{sched.workflow} needs its sprints: sprint = {{ length = \"14d\", "
                                       "anchor = \"2026-01-05\" }", file=file, key=f"{where}.sprint")
        if not sprints and sched.sprint is not None:
            raise errors.ConfigInvalid(f"{sched.workflow} reports on a {workflow.period.value}, not a sprint: leave "
                                       "out sprint", file=file, key=f"{where}.sprint")
        if sprints and sched.after:
            raise errors.ConfigInvalid("a sprint schedule cannot wait for others (after): its periods match no "
                                       "other schedule's", file=file, key=f"{where}.after")
        if sched.project is None:
            if not getattr(workflow, "projectless", False):
                raise errors.ConfigInvalid("project is required", file=file, key=f"{where}.project")
            sched = sched.model_copy(update={"project": PROJECTLESS})
        elif getattr(workflow, "projectless", False):
            raise errors.ConfigInvalid(f"{sched.workflow} reports on the engine itself: leave out project",
                                       file=file, key=f"{where}.project")
        assert sched.project is not None
        pair = (sched.workflow, sched.project)
        if pair in live_pairs:
            raise errors.ConfigInvalid(
                f"schedule '{live_pairs[pair]}' already runs {sched.workflow} for project '{sched.project}'",
                file=file, key=f"{where}.project")
        live_pairs[pair] = sched.name
        try:
            workflow.check_project(settings[sched.workflow], sched.project)
        except errors.ConfigInvalid as exc:
            raise errors.ConfigInvalid(exc.problem, file=file, key=f"{where}.project") from exc
        calendar, own_holidays = calendar_config.resolve(sched.calendar, sched.holidays, named_calendars, where, file)
        spec = dataclasses.replace(sched.to_spec(), calendar=calendar, holidays=own_holidays)
        try:
            _check_timing(spec, workflow.period)
        except errors.ConfigInvalid as exc:
            raise errors.ConfigInvalid(exc.problem, file=file, key=f"{where}.{exc.key}" if exc.key else where) from exc
        if sections.limits.max_runs_per_day is not None:
            refused = _policy(spec, sections.limits.warn_runs_per_day, sections.limits.max_runs_per_day).refused
            if refused:
                raise errors.ConfigInvalid(refused, file=file, key=f"{where}.cron")
        specs.append(spec)
    for name in sections.limits.workflows:
        if name not in registry:
            known = ", ".join(sorted(registry)) or "none installed"
            raise errors.ConfigInvalid(f"unknown workflow '{name}' (known: {known})", file=file,
                                       key=f"limits.workflows.{name}")
    _check_dependencies(specs, file)

    maintenance = calendar_config.windows(sections.maintenance, [spec.name for spec in specs], file)
    store_url = defaults.store_url(db_override, sections.store.url, base_dir)
    backup = None
    if sections.store.backup is not None:
        backup = backup_config.resolve(sections.store.backup, sqlite=store_url.startswith("sqlite"),
                                       base_dir=base_dir, file=file)
    return AppConfig(
        path=path, base_dir=base_dir, store_url=store_url, backup=backup,
        worker=sections.worker, notify=sections.notify, schedules=tuple(specs), raw=raw,
        workflow_settings=settings, retain=sections.store.retain, ui=sections.ui,
        retain_max=sections.store.retain_max, limits=sections.limits, maintenance=maintenance,
    )
