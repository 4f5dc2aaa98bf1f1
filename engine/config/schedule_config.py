"""``[[schedules]]`` and ``[[workflows]]`` entries of ``reportflow.toml``, as written: each schedule's timing,
policies, dependencies and sprint; each workflow file's source."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from engine.config import calendar_config, durations
from engine.config.fields import (
    KEY_PATTERN,
    NAME_PATTERN,
    Duration,
    OptionalDuration,
    Strict,
    check_path,
    parse_freshness_target,
)
from engine.config.problems import problem_from_validation
from engine.core.schedule_spec import (
    Criticality,
    DstFold,
    DstGap,
    Misfire,
    OnUpstream,
    Overlap,
    ReportOn,
    SchedulePriority,
    ScheduleSpec,
    Sprint,
)

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
    # The defaults are ScheduleSpec's (engine.core.schedule_spec): one source.
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
