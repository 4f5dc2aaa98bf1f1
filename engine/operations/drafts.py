"""Schedules drafted from words (SPEC §16.2): ask a workflow's drafter, validate, preview, append.

The engine reads no words itself: a workflow's ``draft_schedule`` (found
through the registry) turns the sentence into an entry. The entry is then
validated by ``engine.config.config_file.build_config``, the function that
validates the config file, on the file's own contents with the draft added
(replacing a schedule of the same name, so its 10× risk can be shown). The
database is never opened. ``append`` writes the TOML block atomically: the
file is the old bytes or the old bytes plus the block, never anything between.

What a model answered is text from outside: a value longer than any schedule field
may be (``limits.ECHOED_VALUE``) is refused before validation and quoted clipped,
and the rationale is kept to one line of that length, so a four-megabyte answer
costs the reader a few lines, not megabytes twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import tomllib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.config import config_file
from engine.core import calendars, errors, limits, redact, run_counts
from engine.core.clock import format_instant
from engine.core.cron import timetable
from engine.core.schedule_spec import ScheduleSpec
from engine.plugins.contract import DraftAnswer, DraftRequest, WorkflowDef
from engine.scheduling import definitions

PREVIEW = 5


@dataclass(frozen=True)
class DraftReport:
    """A draft, the validator's verdict and the preview: what the CLI and the web page show."""

    draft: dict[str, Any]
    rationale: str
    drafter: str
    errors: list[str]
    toml: str
    preview: list[timetable.Fire] = field(default_factory=list)
    runs_per_day: float | None = None
    #: The 10× warning against the file's schedule of that name (None: no such risk).
    risk: str | None = None
    #: A schedule of this name is already in the file (``--write`` refuses it: exit 3).
    exists: bool = False
    #: Runs in the month of the draft (``run_counts``), and the creation policy's warning (None: within it).
    runs_per_month: int | None = None
    policy: str | None = None
    #: What a month of it asks of a model server, from the generations recorded (none: no model, or no store).
    model_time: tuple[str, ...] = ()
    #: For each fire of ``preview``, why it will not run (``holiday``, ``maintenance``), or None.
    skipped: tuple[str | None, ...] = ()

    def skipped_each(self) -> list[str | None]:
        """``skipped``, one per fire of the preview."""
        return [*self.skipped, *[None] * (len(self.preview) - len(self.skipped))][:len(self.preview)]

    @property
    def valid(self) -> bool:
        """True when the draft has no errors."""
        return not self.errors

    def as_json(self) -> dict[str, Any]:
        """SPEC §16.2's ``--json`` shape."""
        return {"draft": self.draft, "valid": self.valid, "errors": self.errors,
                "preview": [{"local": f.local.isoformat(), "utc": format_instant(f.at), "dst_moved": f.moved,
                             "skipped": reason} for f, reason in zip(self.preview, self.skipped_each(), strict=True)],
                "runs_per_day": None if self.runs_per_day is None else round(self.runs_per_day, 2),
                "toml": self.toml, "rationale": self.rationale, "drafter": self.drafter,
                "risk": self.risk, "exists": self.exists, "runs_per_month": self.runs_per_month,
                "policy": self.policy, "model_time": list(self.model_time)}


def drafter(registry: Mapping[str, WorkflowDef], workflow: str | None) -> WorkflowDef:
    """The workflow whose ``draft_schedule`` reads the sentence: ``workflow``'s, else the first
    installed one that has a drafter."""
    if workflow is not None:
        if workflow not in registry:
            raise errors.InvalidInput(f"unknown workflow '{workflow}' (known: {', '.join(sorted(registry))})")
        if registry[workflow].draft_schedule is not None:
            return registry[workflow]
    for name in sorted(registry):
        if registry[name].draft_schedule is not None:
            return registry[name]
    raise errors.InvalidInput("no installed workflow drafts schedules from words")


def config_timezone(config: config_file.AppConfig) -> str | None:
    """The timezone every schedule of the config uses, or None when they differ (or there are none)."""
    zones = {spec.timezone for spec in config.schedules}
    return next(iter(zones)) if len(zones) == 1 else None


def ask(config: config_file.AppConfig, registry: Mapping[str, WorkflowDef], text: str, *,
        project: str | None = None, workflow: str | None = None, name: str | None = None,
        slots: Callable[[str, int], AbstractContextManager[object]] | None = None,
        deadline_s: float | None = None) -> DraftAnswer:
    """The drafter's answer for ``text`` (InvalidInput when it cannot read it); ``name`` names the entry.

    ``slots`` and ``deadline_s`` reach the drafter (``DraftRequest``): the page passes
    the store's slots (without waiting) and its deadline.
    """
    if not text.strip():
        raise errors.InvalidInput("the sentence to draft from is empty")
    owner = drafter(registry, workflow)
    assert owner.draft_schedule is not None
    request = DraftRequest(text=text, project=project, workflow=workflow,
                           workflows={name: wf.period for name, wf in registry.items()}, name=name,
                           timezone=config_timezone(config), slots=slots, deadline_s=deadline_s)
    answer = owner.draft_schedule(config.workflow_settings.get(owner.name), request)
    if name:  # the operator's name wins over the drafter's (and may name a schedule to replace)
        return DraftAnswer({**answer.entry, "name": name}, answer.rationale, answer.drafter)
    taken = {spec.name for spec in config.schedules}
    drafted = str(answer.entry.get("name") or "")
    if drafted in taken:  # a drafted name never replaces a schedule by chance: the first free -N
        free = next(f"{drafted}-{n}" for n in range(2, len(taken) + 3) if f"{drafted}-{n}" not in taken)
        answer = DraftAnswer({**answer.entry, "name": free}, answer.rationale, answer.drafter)
    return answer


def toml_block(entry: Mapping[str, Any]) -> str:
    """``[[schedules]]`` and one ``key = value`` line per field (strings, booleans, integers)."""
    lines = ["[[schedules]]"]
    for key, value in entry.items():
        if isinstance(value, bool):
            shown = "true" if value else "false"
        elif isinstance(value, int):
            shown = str(value)
        else:
            shown = json.dumps(str(value), ensure_ascii=False)
        lines.append(f"{key} = {shown}")
    block = "\n".join(lines) + "\n"
    assert tomllib.loads(block)["schedules"][0] == {k: v if isinstance(v, (bool, int)) else str(v)
                                                    for k, v in entry.items()}
    return block


def _clean(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Only TOML-safe scalar fields, keys as the file spells them."""
    return {str(k): v if isinstance(v, (bool, int)) else str(v) for k, v in entry.items()
            if v is not None and isinstance(v, (str, bool, int, float))}


#: Reads what a month of runs of a schedule asks of its model server (``model_time.estimate`` on the store).
ModelTime = Callable[[ScheduleSpec, int], list[str]]


def evaluate(config: config_file.AppConfig, registry: Mapping[str, WorkflowDef],
             entry: Mapping[str, Any], *, now: datetime, rationale: str = "",
             drafter_name: str = "", model_time: ModelTime | None = None) -> DraftReport:
    """Validate ``entry`` as if it were in the config file, and preview it (with ``model_time``, what it asks of a
    model)."""
    draft = _clean(entry)
    rationale = redact.clip(redact.neutralise(rationale), limits.ECHOED_VALUE)
    too_long = [f"{key}: {redact.echoed(value)}: longer than a schedule's {key} may be"
                for key, value in draft.items() if isinstance(value, str) and len(value) > limits.ECHOED_VALUE]
    if too_long:  # never validated (its errors would quote it whole) nor shown whole
        shown = {k: redact.clip(v, limits.ECHOED_VALUE) if isinstance(v, str) else v for k, v in draft.items()}
        return DraftReport(shown, rationale, drafter_name, too_long, toml_block(shown))
    block = toml_block(draft)
    raw = dict(config.raw)
    existing = [dict(s) for s in raw.get("schedules", []) if isinstance(s, Mapping)]
    name = draft.get("name")
    exists = any(s.get("name") == name for s in existing)
    raw["schedules"] = [s for s in existing if s.get("name") != name] + [draft]
    try:
        candidate = config_file.build_config(raw, path=config.path, registry=registry)
    except errors.ConfigInvalid as exc:
        return DraftReport(draft, rationale, drafter_name, [exc.message], block, exists=exists)
    spec = candidate.schedules[-1]
    old = _spec_named(config, str(name))
    risk = definitions.check_risk(old, spec, now, confirmed=True)
    fires = timetable.preview(spec.cron, spec.timezone, now, PREVIEW, dst_gap=spec.dst_gap,
                         dst_fold=spec.dst_fold)
    counts = run_counts.count_month(spec.cron, spec.timezone, run_counts.month_of(now, spec.timezone),
                                    dst_gap=spec.dst_gap, dst_fold=spec.dst_fold)
    policy = run_counts.decide(spec.name, counts, warn_per_day=candidate.limits.warn_runs_per_day,
                               max_per_day=candidate.limits.max_runs_per_day).warning
    asks = tuple(model_time(spec, counts.per_month)) if model_time is not None else ()
    windows = [w for w in candidate.maintenance if not w.schedules or spec.name in w.schedules]
    skipped = tuple(None if (why := calendars.excuse(spec, windows, fire.at)) is None else why.value for fire in fires)
    return DraftReport(draft, rationale, drafter_name, [], block, fires,
                       definitions.runs_per_day(spec, now), risk, exists, counts.per_month, policy, asks, skipped)


def _spec_named(config: config_file.AppConfig, name: str) -> ScheduleSpec | None:
    for spec in config.schedules:
        if spec.name == name:
            return spec
    return None


def draft(config: config_file.AppConfig, registry: Mapping[str, WorkflowDef], text: str, *,
          now: datetime, project: str | None = None, workflow: str | None = None,
          name: str | None = None, slots: Callable[[str, int], AbstractContextManager[object]] | None = None,
          deadline_s: float | None = None, model_time: ModelTime | None = None) -> DraftReport:
    """Ask the drafter, then ``evaluate`` its entry."""
    answer = ask(config, registry, text, project=project, workflow=workflow, name=name, slots=slots,
                 deadline_s=deadline_s)
    return evaluate(config, registry, answer.entry, now=now, rationale=answer.rationale,
                    drafter_name=answer.drafter, model_time=model_time)


def append(path: Path, report: DraftReport) -> None:
    """Append the draft's block to ``path`` atomically (temporary file, fsync, rename).

    Refuses an invalid draft (InvalidInput, exit 2) and a name already in the
    file as it is now (Conflict, exit 3); nothing is written then. Appenders take
    turns (a lock on the folder), so each reads the file the last one wrote and no
    draft is lost to a concurrent one. The temporary file has one fixed name: one
    left by a SIGKILL mid-write is overwritten by the next append, never piled up.
    A symlinked config is followed: the file it points at is the one rewritten (beside
    itself, so the rename stays in one folder), and the link stays a link.
    """
    if not report.valid:
        raise errors.InvalidInput(f"the draft is not valid: {report.errors[0]}")
    path = Path(os.path.realpath(path))
    if not path.is_file():
        raise errors.InvalidInput(f"{path} is not a regular file; the draft can only be appended to one")
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(directory, fcntl.LOCK_EX)  # released when the descriptor is closed
        old = path.read_bytes()
        names = [s.get("name") for s in tomllib.loads(old.decode("utf-8")).get("schedules", [])]
        if report.exists or report.draft.get("name") in names:
            raise errors.Conflict(f"a schedule named '{report.draft.get('name')}' is already in "
                                  f"{path}; edit it there or draft another name")
        joint = b"" if not old or old.endswith(b"\n\n") else b"\n" if old.endswith(b"\n") else b"\n\n"
        tmp = temporary_path(path)
        try:
            # O_NOFOLLOW: a symlink planted at the fixed name is refused, not written through.
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "wb") as handle:
                handle.write(old + joint + report.toml.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, path.stat().st_mode & 0o7777)
            os.replace(tmp, path)
        except OSError as exc:  # a full disk, a read-only folder, a symlink at the temporary name
            _discard(tmp)
            raise errors.ReportflowError(f"could not append the draft to {path}: {exc.strerror or exc} "
                                         f"({tmp.name}); the file is unchanged") from exc
        except BaseException:
            _discard(tmp)
            raise
        os.fsync(directory)
    finally:
        os.close(directory)


def _discard(tmp: Path) -> None:
    if tmp.is_file() and not tmp.is_symlink():  # never what someone else planted there
        tmp.unlink()


def temporary_path(path: Path) -> Path:
    """Where ``append`` writes the new file before renaming it over ``path``."""
    return path.with_name(f".{path.name}.draft")
