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
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
)

from engine.config import backup_config, calendar_config, defaults
from engine.config.engine_sections import LimitsConfig, NotifyConfig, StoreConfig, UiConfig, WorkerConfig
from engine.config.problems import problem_from_validation
from engine.config.schedule_config import PROJECTLESS, ScheduleConfig, WorkflowSourceConfig
from engine.core import calendars, dependencies, errors
from engine.core.models import PeriodKind
from engine.core.schedule_spec import DstFold, DstGap, ScheduleSpec


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
