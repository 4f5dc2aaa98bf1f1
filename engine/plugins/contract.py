"""The workflow contract between the engine and the code that plugs into it.

A workflow declares its business period, its payload version and its ordered
steps; the engine never knows what a step does. Workflows are found through
the ``reportflow.workflows`` entry-point group (see ``engine.plugins.workflow_registry``).

A step receives a ``StepContext`` (the run's pinned inputs and the persisted
outputs of earlier steps) and returns a ``StepResult`` whose ``output`` is
committed together with the step's SUCCESS. Steps must make their external
effects idempotent and call ``ctx.check_fence()`` right before each one. A
step retries a call with ``ctx.retry`` (``engine.plugins.retrying``), whose
waits are ``ctx.sleep``: the engine's clock, ended by SIGTERM or a lost lease.

Typed outputs: a ``StepSpec`` may name a pydantic ``output_model``. The worker
validates what the step returns against it before the boundary commits (a
mismatch fails the step with ``OUTPUT_INVALID`` and commits no output), stores
it as JSON, and later steps read it back parsed with ``ctx.output(Model)``, in
this process or after a resume in another. ``engine.plugins.authoring`` builds these
definitions from decorated functions.
"""

from __future__ import annotations

import importlib
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import typing_extensions
from pydantic import BaseModel, ValidationError

from engine.core import clock, errors
from engine.core.deliveries import DeliveryBook, MemoryDeliveries
from engine.core.models import PeriodKind, RunStatus, StepStatus
from engine.core.period_fates import PeriodFate
from engine.core.timeline_marks import Mark, MarkLine
from engine.plugins import retrying

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
#: A workflow's settings type (what its ``load_settings`` returns); unnamed, ``Any``.
SettingsT = typing_extensions.TypeVar("SettingsT", default=Any)


@dataclass(frozen=True)
class ArtifactRef:
    """An external effect of a step: (kind, location) identifies it within a run."""

    kind: str
    location: str
    sha256: str | None = None
    external_id: str | None = None


@dataclass(frozen=True)
class ChildRun:
    """A child run a fan-out step asks for: an ordinary run of ``workflow`` keyed ``{parent key}/{name}``.

    ``inputs`` (JSON) are pinned into the child and read there as ``ctx.inputs``;
    ``project`` defaults to the parent's.
    """

    name: str
    workflow: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    project: str | None = None


@dataclass(frozen=True)
class ChildOutcome:
    """How one child run ended, as its parent's fan-in step reads it (``ctx.children()``)."""

    name: str
    run_id: int
    key: str
    workflow: str
    project: str
    status: RunStatus
    error_code: str | None
    error_message: str | None
    outputs: Mapping[str, Mapping[str, Any]]  # step name -> committed output

    @property
    def succeeded(self) -> bool:
        """True when the child run ended SUCCESS."""
        return self.status is RunStatus.SUCCESS


def _no_children() -> tuple[ChildOutcome, ...]:
    return ()


@contextmanager
def _no_mutex(name: str) -> Iterator[None]:
    yield


@contextmanager
def _no_slots(name: str, count: int) -> Iterator[int]:
    yield 0


def node_name() -> str:
    """This node's name: ``REPORTFLOW_NODE`` when set (several nodes on one machine, in tests), else the host's."""
    return os.environ.get("REPORTFLOW_NODE") or socket.gethostname()


def _no_pace(name: str, interval: timedelta) -> None:
    return None


def _real_sleep(seconds: float) -> None:
    """``ctx.sleep`` of a step called outside a worker (a test, a script): real time."""
    clock.REAL.sleep(seconds)
def _no_earlier_periods(schedule: str, before: datetime) -> tuple[PeriodFate, ...]:
    return ()


def _no_facts(start: datetime, end: datetime) -> Mapping[str, Any]:
    raise errors.StepError("CONFIG_INVALID", "this engine gives no run facts to steps", retryable=False)


class MarkBook(Protocol):
    """A timeline's marks, kept by the engine for every run (``engine.store.marks``): read, then record.

    ``record`` adds marks only if the line is still at the version read (False: read again and
    decide again), and an instant already marked keeps its first value.
    """

    def read(self, line: str) -> MarkLine:
        """The line's version and its marks in time order."""
        ...

    def record(self, line: str, version: int, marks: Sequence[Mark]) -> bool:
        """Add ``marks`` if the line is still at ``version``; False (nothing written) if it moved on."""
        ...


class MemoryMarks:
    """A ``MarkBook`` in memory: for a step called outside a worker (a test, a script)."""

    def __init__(self) -> None:
        self._lines: dict[str, MarkLine] = {}
        self._lock = threading.Lock()

    def read(self, line: str) -> MarkLine:
        """The line's version and its marks in time order."""
        return self._lines.get(line, MarkLine(line, 0))

    def record(self, line: str, version: int, marks: Sequence[Mark]) -> bool:
        """Add ``marks`` if the line is still at ``version`` (first value of an instant kept)."""
        with self._lock:
            current = self.read(line)
            if current.version != version:
                return False
            if not marks:
                return True
            known = {m.at: m for m in current.marks}
            for mark in marks:
                known.setdefault(mark.at, mark)
            self._lines[line] = MarkLine(line, version + 1, tuple(sorted(known.values(), key=lambda m: m.at)))
            return True


@dataclass(frozen=True)
class StepContext(Generic[SettingsT]):
    """What a step is handed; ``StepContext[MySettings]`` types ``settings`` as its workflow's."""

    run_id: int
    workflow: str
    project: str
    idempotency_key: str
    business_key: str
    revision: int
    scheduled_for: datetime
    period_start_at: datetime
    period_end_at: datetime
    timezone: str
    attempt: int
    pinned: Mapping[str, Any]
    outputs: Mapping[str, Mapping[str, Any]]
    settings: SettingsT
    check_fence: Callable[[], None]
    # This step's own output from an earlier execution (a re-run after --from-step), if any.
    previous_output: Mapping[str, Any] | None = None
    # A mutex shared by every worker on the store (e.g. one generation per Ollama host).
    exclusive: Callable[[str], AbstractContextManager[None]] = _no_mutex
    # ``slots(name, count)``: one of ``count`` slots of a pool shared by every worker on the store (a model host
    # that runs ``count`` generations at once); ``count`` 1 is ``exclusive(name)``.
    slots: Callable[[str, int], AbstractContextManager[object]] = _no_slots
    # This node's name (``REPORTFLOW_NODE``, else the host name): what keys a resource each node has its own of.
    node: str = field(default_factory=node_name)
    # ``pace(name, interval)`` waits for a slot of a rate limit shared by every worker on the
    # store: slots of one name are at least ``interval`` apart (e.g. Notion's 3 requests/s).
    pace: Callable[[str, timedelta], None] = _no_pace
    # ``sleep(seconds)`` on the engine's clock: a step's waits between retries (``retry`` waits through it).
    # It ends early at SIGTERM (``errors.Interrupted``: the run is handed back to resume at this
    # step) or a lost lease (``errors.LeaseLost``: nothing is written).
    sleep: Callable[[float], None] = _real_sleep
    # ``engine_facts(start, end)``: the engine's own record of the runs whose slot is in
    # [start, end) (``engine.store.ops_facts``), for a workflow that reports on the engine.
    engine_facts: Callable[[datetime, datetime], Mapping[str, Any]] = _no_facts
    # Timelines of marks shared by every run on the store (``MarkBook``): a report's window edges.
    # ``earlier_periods(schedule, before)``: the schedule's periods ending at ``before`` and earlier, newest first,
    # up to the first that has or may still get a run of its own (``engine.core.period_fates``).
    earlier_periods: Callable[[str, datetime], tuple[PeriodFate, ...]] = _no_earlier_periods
    marks: MarkBook = field(default_factory=MemoryMarks)
    # The at-most-once outbox of messages to the outside (``engine.core.deliveries``): a row per key and target,
    # committed SENDING before each send, so that no retry or crash sends one twice.
    deliveries: DeliveryBook = field(default_factory=MemoryDeliveries)
    # Step name -> declared output model (a class, or its "pkg.mod:Model" path, not imported here).
    output_models: Mapping[str, type[BaseModel] | str] = field(default_factory=dict)
    # The inputs a parent's fan-out step gave this child run (empty for a run that is no child).
    inputs: Mapping[str, Any] = field(default_factory=dict)
    # The outcomes of the child runs this run's fan-out step started, read from the store when called.
    children: Callable[[], tuple[ChildOutcome, ...]] = _no_children
    # Children asked for by ``start_child`` during this step, created at its boundary.
    started: list[ChildRun] = field(default_factory=list)
    # The pinned inputs as ``pins(Model)`` parsed them: once per step, however many readers.
    _parsed_pins: dict[type[BaseModel], BaseModel] = field(default_factory=dict, init=False, repr=False,
                                                           compare=False)

    def start_child(self, name: str, workflow: str, inputs: Mapping[str, Any] | None = None, *,
                    project: str | None = None) -> None:
        """Ask for a child run; created exactly once, in this step's boundary transaction (SPEC §17).

        After that boundary the run waits (``WAITING``, no lease) until every child
        has finished; its next step reads them with ``ctx.children()``. Asking
        again for the same name replaces the request (a step retried in-process).
        """
        if not name or "/" in name:
            raise errors.StepError("CHILD_INVALID", f"a child's name must be non-empty without '/': {name!r}",
                                   retryable=False)
        self.started[:] = [c for c in self.started if c.name != name]
        self.started.append(ChildRun(name, workflow, dict(inputs or {}), project))

    def retry(self, fn: Callable[[], T], *, retryable: Callable[[BaseException], bool],
              budget: retrying.RetryBudget | float, max_attempts: int | None = None, initial_s: float = 1.0,
              max_wait_s: float = 10.0, on_retry: retrying.OnRetry | None = None) -> T:
        """``fn()`` retried inside the step (``retrying.call``), every wait through ``self.sleep``.

        Waits back off from ``initial_s`` to ``max_wait_s`` with jitter, or honour a
        ``StepError``'s ``retry_after_s``; they stop at ``max_attempts`` or when the
        next one does not fit in ``budget`` (seconds, or a ``RetryBudget`` shared by
        several calls), and the last error goes up. SIGTERM or a lost lease ends a
        wait with ``Interrupted`` or ``LeaseLost``.
        """
        return retrying.call(fn, sleep=self.sleep, retryable=retryable, budget=budget, max_attempts=max_attempts,
                             initial_s=initial_s, max_wait_s=max_wait_s, on_retry=on_retry)

    def pins(self, model: type[M]) -> M:
        """The run's pinned inputs parsed as ``model``, the workflow's pins model (fields with defaults read runs
        pinned before a key existed as they ran). A mismatch is a permanent ``OUTPUT_INVALID`` naming the field."""
        parsed = self._parsed_pins.get(model)
        if parsed is None:
            parsed = self._parsed_pins[model] = parse_output(model, dict(self.pinned), "the run's pinned inputs")
        assert isinstance(parsed, model)
        return parsed

    def output(self, model: type[M], step: str | None = None) -> M:
        """The committed output of the earlier step that declares ``model`` (or of ``step``), parsed.

        Raises ``StepError(OUTPUT_INVALID)`` (permanent) when no earlier step
        has committed such an output, or when the stored JSON no longer parses
        as ``model`` (a shape change made without a new payload version).
        """
        if step is None:
            path = f"{model.__module__}:{model.__qualname__}"
            names = [name for name, declared in self.output_models.items() if declared is model or declared == path]
            if len(names) != 1:
                found = "no step" if not names else f"steps {', '.join(names)}"
                raise errors.StepError("OUTPUT_INVALID", f"{found} of {self.workflow} declare output "
                                       f"{model.__name__}; pass the step name", retryable=False)
            step = names[0]
        if step not in self.outputs:
            raise errors.StepError("OUTPUT_INVALID", f"step {step} has no committed output for this run "
                                   f"(it has not succeeded yet)", retryable=False)
        return parse_output(model, self.outputs[step], f"the stored output of {step}")

    def previous(self, model: type[M]) -> M | None:
        """This step's own output from an earlier execution, parsed; None if absent or of another shape."""
        if self.previous_output is None:
            return None
        try:
            return model.model_validate(dict(self.previous_output))
        except ValidationError:
            return None  # e.g. the note of a SKIPPED execution: there is nothing to reuse


def parse_output(model: type[M], data: Any, what: str) -> M:
    """Validate ``data`` as ``model``; a mismatch is a permanent ``OUTPUT_INVALID`` naming the field."""
    try:
        if isinstance(data, model):
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump(mode="json")
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(root)"
        raise errors.StepError(
            "OUTPUT_INVALID", f"{what} is not a valid {model.__name__}: {where}: {first['msg']} "
            f"({exc.error_count()} error(s))", retryable=False) from None


@dataclass(frozen=True)
class Degraded:
    """A step that succeeded around an outside failure (a fallback writer instead of the model).

    ``code`` is the error it worked around: the provider the workflow maps it to
    (``WorkflowDef.providers``) is waited for, and when that provider answers again the
    run is queued again from this step, in place (SPEC §15.5). ``message`` says what happened.
    """

    code: str
    message: str


@dataclass(frozen=True)
class StepResult:
    """What a step hands back.

    ``pins`` are merged into the run's pinned inputs, but only for keys not yet
    pinned (first collect wins, for ever). ``skip_remaining`` ends the run
    SUCCESS with the later steps SKIPPED for that reason. ``degraded``: the step
    succeeded around an outside failure; the engine records it on the step and
    runs the run again from it once the provider answers.
    """

    output: dict[str, Any] | BaseModel = field(default_factory=dict)
    status: StepStatus = StepStatus.SUCCESS
    pins: dict[str, Any] = field(default_factory=dict)
    artifacts: tuple[ArtifactRef, ...] = ()
    skip_remaining: str | None = None
    degraded: Degraded | None = None


StepFn = Callable[[StepContext], StepResult]


@lru_cache(maxsize=None)
def _import_model(ref: str) -> type[BaseModel]:
    module_name, _, attr = ref.partition(":")
    try:
        model = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise errors.StepError("OUTPUT_INVALID", f"output model {ref} cannot be imported: {exc}",
                               retryable=False) from exc
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise errors.StepError("OUTPUT_INVALID", f"output model {ref} is not a pydantic model", retryable=False)
    return model


@dataclass(frozen=True)
class StepSpec:
    """One ordered step.

    - ``optional``: a permanent failure after earlier steps succeeded ends the
      run PARTIAL_SUCCESS rather than FAILED.
    - ``output_model``: the pydantic model a SUCCESS output must validate as
      (a SKIPPED step's output is a note, stored as given); or its import
      path ``"pkg.mod:Model"``, imported when first needed, so registering a
      workflow does not import its steps' heavy libraries.
    - ``retry_on``: error codes retryable for this step on top of the engine's
      classification (``errors.RETRYABLE_CODES``).
    - ``retry_budget_s``: seconds the worker may wait between in-process
      re-executions of the step after a retryable error (exponential backoff
      with jitter, ``Retry-After`` honoured) before the run goes RETRY_PENDING;
      0 leaves retries to the run level. The timeout covers all executions.
    - ``inline``: a quick step without blocking I/O runs on the worker's own
      thread, skipping the hand-off to the step thread; it cannot be abandoned
      mid-way, so its timeout is checked when it returns (an overrun still fails
      ``STEP_TIMEOUT`` and its result is dropped).
    """

    name: str
    run: StepFn
    timeout_s: float = 600.0
    optional: bool = False
    inline: bool = False
    output_model: type[BaseModel] | str | None = None
    retry_on: frozenset[str] = frozenset()
    retry_budget_s: float = 0.0

    def model(self) -> type[BaseModel] | None:
        """The declared output model, imported now if it was given as ``"pkg.mod:Model"``."""
        if isinstance(self.output_model, str):
            return _import_model(self.output_model)
        return self.output_model

    def model_name(self) -> str | None:
        """The output model's name, without importing it."""
        if isinstance(self.output_model, str):
            return self.output_model.rpartition(":")[2]
        return self.output_model.__name__ if self.output_model is not None else None

    def is_retryable(self, error: errors.StepError) -> bool:
        """Whether ``error`` is retried: it says so, or its code is in ``retry_on``."""
        return error.retryable or error.code in self.retry_on

    def commit_output(self, result: StepResult) -> dict[str, Any]:
        """The JSON object to store for ``result``: validated against ``output_model`` when it is a SUCCESS."""
        output = result.output
        model = self.model()
        if model is not None and result.status is StepStatus.SUCCESS:
            return parse_output(model, output, f"step {self.name}'s output").model_dump(mode="json")
        if isinstance(output, BaseModel):
            return output.model_dump(mode="json")
        if not isinstance(output, dict):
            raise errors.StepError("OUTPUT_INVALID", f"step {self.name} returned a {type(output).__name__} "
                                   "as its output, not a dict or a pydantic model", retryable=False)
        return output


@dataclass(frozen=True)
class Finding:
    """One line of ``reportflow doctor``: what was checked, and whether a person must act."""

    check: str
    message: str
    problem: bool = False
    warning: bool = False  # worth a look, but nothing is broken (doctor still exits 0)


@dataclass(frozen=True)
class ProbeResult:
    """One health probe's answer: healthy or not, and a short reason a person can act on (no secret)."""

    healthy: bool
    detail: str


@dataclass(frozen=True)
class Provider:
    """An outside service a workflow's runs depend on (a model server, a page store), with a cheap probe.

    - ``name`` identifies it across workflows and processes (the same service, the same
      name); ``label`` is what a person reads ("ollama at http://127.0.0.1:11434"). Neither
      may hold a secret: both are stored and shown.
    - ``codes``: the step error codes that mean this provider failed a run; such a run waits
      for it and is queued again, from the failed step, once a probe says it is healthy.
    - ``probe()``: one short request (seconds, not minutes); it never raises.
    - ``timed_step``: the step whose time is this provider's work (a model's generation), if one is:
      ``schedules apply`` and ``schedules draft`` estimate a month of it from the durations recorded.
    - ``pool``: the pool of slots that work holds (``Store.slot``: its name and size), if one: the metrics
      show how many of them are held.
    """

    name: str
    label: str
    codes: frozenset[str]
    probe: Callable[[], ProbeResult]
    timed_step: str | None = None
    pool: tuple[str, int] | None = None


def _no_settings(raw: Mapping[str, Any], base_dir: Path) -> None:
    return None


def _no_pins(settings: Any, project: str) -> dict[str, Any]:
    return {}


def _check_nothing(settings: Any, project: str) -> None:
    return None


def _serves_all(settings: Any, project: str) -> bool:
    return True


def _no_files(settings: Any) -> Path | None:
    return None


def _no_child_projects(settings: Any, project: str) -> list[str]:
    return []


def _no_providers(settings: Any) -> tuple[Provider, ...]:
    return ()


def _nothing_to_diagnose(settings: Any, projects: Sequence[str], artifacts: Sequence[Any]) -> list[Finding]:
    return []


@dataclass(frozen=True)
class DraftRequest:
    """A sentence to turn into a ``[[schedules]]`` entry (SPEC §16.2), with the operator's hints."""

    text: str
    project: str | None
    workflow: str | None
    #: The installed workflows a draft may name, and their periods.
    workflows: Mapping[str, PeriodKind]
    #: The schedule's name, when the operator gave one (``--name``).
    name: str | None = None
    #: The timezone a sentence that names none is read in: the config's schedules', when they agree.
    timezone: str | None = None
    #: The store's pools of slots (``Store.slot``: name, count): a drafter that asks a model holds one of the
    #: model host's generation slots, the pool GENERATE_REPORT's generations hold (None: no slot).
    slots: Callable[[str, int], AbstractContextManager[object]] | None = None
    #: The most a drafter may wait for its model, in seconds, overall (None: the model's own timeout).
    deadline_s: float | None = None


@dataclass(frozen=True)
class DraftAnswer:
    """A drafted ``[[schedules]]`` entry as the config file would hold it, and why."""

    entry: Mapping[str, Any]
    rationale: str
    #: Who drafted it: ``builtin grammar``, ``ollama llama3.1:8b``...
    drafter: str


@dataclass(frozen=True)
class WorkflowDef:
    """A workflow as the engine sees it.

    - ``sections`` names the top-level config sections the workflow owns; any
      other unknown section is refused (a typo must not read as "no schedules").
    - ``load_settings(raw_config, base_dir)`` validates the config sections the
      workflow owns and returns its settings; raises ``ConfigInvalid``.
    - ``check_project(settings, project)`` raises ``ConfigInvalid`` for a
      schedule naming a project the workflow cannot run.
    - ``pin(settings, project)`` returns the workflow's inputs to pin into a
      new run (model, prompt version, branches...).
    - ``can_serve(settings, project)`` tells whether this node can run the
      project (e.g. its repository is present here).
    - ``child_projects(settings, project)`` names the projects of the child runs a
      run fans out into (SPEC §17), which a worker serving the schedule claims too.
    - ``diagnose(settings, projects, artifacts)`` returns doctor findings for the
      workflow's own dependencies (repositories, model server, destinations) and
      its external artifacts (``ArtifactRecord`` of successful runs).
    - ``files_root(settings)`` is the folder the workflow's file artifacts lie in (None:
      it writes none); the page shows a saved file only from inside it.
    - ``draft_schedule(settings, request)`` turns a sentence into a schedule
      entry (``DraftAnswer``); raises ``InvalidInput`` for one it cannot read.
      The engine validates the answer like any schedule in the file; how the
      workflow reads words (a grammar, a model) is its own business.
    - ``providers(settings)`` names the outside services its runs depend on, the error
      codes that mean each one failed, and a probe (SPEC §15.5): ``serve`` and ``cycle``
      probe them and queue the runs they failed again once they answer.
    """

    name: str
    period: PeriodKind
    steps: tuple[StepSpec, ...]
    payload_version: int = 1
    sections: tuple[str, ...] = ()  # top-level config sections this workflow owns
    load_settings: Callable[[Mapping[str, Any], Path], Any] = _no_settings
    check_project: Callable[[Any, str], None] = _check_nothing
    pin: Callable[[Any, str], dict[str, Any]] = _no_pins
    can_serve: Callable[[Any, str], bool] = _serves_all
    diagnose: Callable[[Any, Sequence[str], Sequence[Any]], list[Finding]] = _nothing_to_diagnose
    files_root: Callable[[Any], Path | None] = _no_files  # the folder its file artifacts must lie in
    # The projects of the child runs a run of ``project`` fans out into: a worker serving the
    # schedule claims them too (a missing repository must fail its child, not strand the parent).
    child_projects: Callable[[Any, str], list[str]] = _no_child_projects
    draft_schedule: Callable[[Any, DraftRequest], DraftAnswer] | None = None
    # The outside services its runs depend on, with their error codes and probes (no I/O when called).
    providers: Callable[[Any], tuple[Provider, ...]] = _no_providers
    #: Its schedules name no project: their runs are keyed ``{workflow}:ops:{business_key}``.
    projectless: bool = False
    #: The step that sends its reports out through ``StepContext.deliveries``, if one: ``runs resend`` queues a run
    #: again from it, once it has made the run's unconfirmed or failed deliveries PENDING.
    delivery_step: str | None = None
    origin: str = ""  # where the registry found it: an entry point, a file or a module (set on loading)

    def step_names(self) -> tuple[str, ...]:
        """The names of the workflow's steps, in order."""
        return tuple(step.name for step in self.steps)

    def step(self, name: str) -> StepSpec:
        """The step named ``name``; raises KeyError."""
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)

    def provider_for(self, settings: Any, code: str | None) -> Provider | None:
        """The provider whose failure ``code`` means for this workflow's runs, or None."""
        if code is None:
            return None
        return next((p for p in self.providers(settings) if code in p.codes), None)

    def output_models(self) -> dict[str, type[BaseModel] | str]:
        """Each typed step's declared model, as declared (import paths are not imported here)."""
        return {step.name: step.output_model for step in self.steps if step.output_model is not None}
