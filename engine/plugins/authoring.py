"""Writing a workflow in one file: a small builder over ``WorkflowDef`` and ``StepSpec``.

::

    from engine.plugins.authoring import StepContext, StepError, Workflow

    wf = Workflow("release_notes", period="week", payload_version=1, settings=ReleaseSettings)

    @wf.pin
    def inputs(settings: ReleaseSettings, project: str) -> dict[str, object]:
        return {"branch": settings.branch}            # computed once, when the run is created

    @wf.step(timeout="2m")
    def collect_tags(ctx: StepContext, settings: ReleaseSettings) -> Tags: ...

    @wf.step(timeout="30s", retry_on=["WEBHOOK_UNAVAILABLE"], retry_budget="20s")
    def post_webhook(ctx: StepContext, notes: Notes) -> Posted: ...

Steps run in the order they are declared; a step's name is its function's
name in upper case (``COLLECT_TAGS``) unless given. The first parameter gets
the ``StepContext``; every other parameter is injected by its annotation: the
workflow's settings model, or the output model of an earlier step (parsed from
what that step committed, also after a resume in another process). The return
annotation, when it is a pydantic model, is the step's ``output_model``: the
worker validates the returned value against it before the step boundary
commits. A step may also return a ``StepResult`` (pins, artifacts,
``skip_remaining``) whose ``output`` is such a model.

Fan-out (SPEC §17): ``@wf.fan_out(child="fetch_one")`` declares a step that
returns ``{name: inputs}`` (each inputs a pydantic model); each becomes a child
run of ``fetch_one`` keyed ``{parent key}/{name}``, created exactly once at the
step's boundary. The child workflow declares ``inputs=Model`` and its steps
take a parameter annotated with that model. A later step of the parent takes
``list[ChildResult[Out]]``: every child's status, error and its last step's
output parsed as ``Out``, read after the last child finished::

    @wf.fan_out(child="fetch_one")
    def split(ctx: StepContext, settings: Settings) -> dict[str, FetchIn]:
        return {repo.name: FetchIn(url=repo.url) for repo in settings.repos}

    @wf.step
    def join(ctx: StepContext, results: list[ChildResult[Fetched]]) -> Summary: ...

The registry accepts a ``Workflow`` wherever it accepts a ``WorkflowDef``
(entry points, ``[[workflows]]`` files and modules); ``definition()`` builds
the ``WorkflowDef`` once, after the module has finished importing.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from pydantic import BaseModel, ValidationError

from engine.config import durations, problems
from engine.core import errors
from engine.core.errors import StepError
from engine.core.models import PeriodKind, StepStatus
from engine.plugins import contract
from engine.plugins.contract import ArtifactRef, StepContext, StepFn, StepResult, StepSpec, WorkflowDef

__all__ = ["ArtifactRef", "ChildResult", "StepContext", "StepError", "StepResult", "StepStatus", "Workflow"]

F = TypeVar("F", bound=Callable[..., Any])
OutputT = TypeVar("OutputT", bound=BaseModel)


class ChildResult(BaseModel, Generic[OutputT]):
    """One child run as a fan-in step sees it: how it ended, and its last step's output parsed (None unless SUCCESS)."""

    name: str
    run_id: int
    key: str
    project: str
    status: str
    error_code: str | None = None
    error_message: str | None = None
    output: OutputT | None = None

    @property
    def succeeded(self) -> bool:
        """True when the child run ended SUCCESS."""
        return self.status == "SUCCESS"


PinFn = Callable[[Any, str], Mapping[str, Any]]


class _Declared:
    """A step as written, before its signature is resolved (names used in annotations may come later)."""

    def __init__(self, fn: Callable[..., Any], name: str, timeout_s: float, optional: bool,
                 retry_on: frozenset[str], retry_budget_s: float, output: type[BaseModel] | None,
                 child: str | None = None) -> None:
        self.fn = fn
        self.child = child  # a fan-out step: the workflow of the child runs it starts
        self.name = name
        self.timeout_s = timeout_s
        self.optional = optional
        self.retry_on = retry_on
        self.retry_budget_s = retry_budget_s
        self.output = output


def _seconds(value: str | float | int, what: str) -> float:
    try:
        return durations.parse(value).total_seconds()
    except ValueError as exc:
        raise errors.InvalidInput(f"{what}: {exc}") from None


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _as_result(value: Any) -> StepResult:
    """What a decorated step returned, as the engine's ``StepResult`` (validated later by the worker)."""
    if isinstance(value, StepResult):
        return value
    if value is None:
        return StepResult()
    if isinstance(value, BaseModel | dict):
        return StepResult(output=value)
    raise errors.StepError("OUTPUT_INVALID", f"a step returned a {type(value).__name__}; return a pydantic "
                           "model, a dict, a StepResult or None", retryable=False)


class Workflow:
    """A workflow being declared: its period, payload version, settings, pins and ordered steps."""

    def __init__(self, name: str, *, period: str | PeriodKind, payload_version: int = 1,
                 settings: type[BaseModel] | None = None, section: str | None = None,
                 inputs: type[BaseModel] | None = None) -> None:
        try:
            self.period = PeriodKind(period)
        except ValueError:
            choices = ", ".join(kind.value for kind in PeriodKind)
            raise errors.InvalidInput(f"workflow {name}: period '{period}' is not one of {choices}") from None
        if not isinstance(payload_version, int) or payload_version < 1:
            raise errors.InvalidInput(f"workflow {name}: payload_version must be a positive integer")
        self.name = name
        self.payload_version = payload_version
        self.settings_model = settings
        self.inputs_model: type[BaseModel] | None = inputs  # a child workflow: the inputs its parent's fan-out gives each run
        self.section = section or name
        self._steps: list[_Declared] = []
        self._pin: PinFn | None = None
        self._built: WorkflowDef | None = None

    @overload
    def step(self, fn: F, /) -> F: ...

    @overload
    def step(self, fn: None = None, /, *, name: str | None = None, timeout: str | float = "10m",
             optional: bool = False, retry_on: Iterable[str] = (), retry_budget: str | float = 0,
             output: type[BaseModel] | None = None) -> Callable[[F], F]: ...

    def step(self, fn: F | None = None, /, *, name: str | None = None, timeout: str | float = "10m",
             optional: bool = False, retry_on: Iterable[str] = (), retry_budget: str | float = 0,
             output: type[BaseModel] | None = None) -> F | Callable[[F], F]:
        """Declare the next step (``@wf.step`` or ``@wf.step(timeout="30s", ...)``); returns ``fn`` unchanged.

        ``timeout`` bounds the step (all its in-process retries included);
        ``optional`` lets the run end PARTIAL_SUCCESS when this step fails for
        good; ``retry_on`` lists error codes that are retryable for this step;
        ``retry_budget`` is how long the worker may wait re-executing the step
        after a retryable error before handing the retry to the run level;
        ``output`` overrides the model read from the return annotation.
        """
        def register(func: F) -> F:
            if self._built is not None:
                raise errors.InvalidInput(f"workflow {self.name}: steps cannot be added after it was loaded")
            step_name = name or func.__name__.upper()
            if any(declared.name == step_name for declared in self._steps):
                raise errors.InvalidInput(f"workflow {self.name}: two steps are named {step_name}")
            self._steps.append(_Declared(
                func, step_name, _seconds(timeout, f"step {step_name} timeout"), optional,
                frozenset(retry_on), _seconds(retry_budget, f"step {step_name} retry_budget"), output))
            return func

        return register(fn) if fn is not None else register

    def fan_out(self, *, child: str, name: str | None = None, timeout: str | float = "10m") -> Callable[[F], F]:
        """Declare the next step as a fan-out: it returns ``{name: inputs model}``, one child run of ``child`` each.

        The children are created at the step's boundary (exactly once, even if the
        step runs again after a crash); the run then waits, holding no lease, until
        every child has finished, and goes on with the next step (SPEC §17).
        """
        def register(func: F) -> F:
            self.step(name=name, timeout=timeout)(func)
            self._steps[-1].child = child
            return func

        return register

    def pin(self, fn: PinFn) -> PinFn:
        """Declare the inputs pinned into each new run: ``fn(settings, project) -> dict`` (JSON values)."""
        self._pin = fn
        return fn

    def definition(self) -> WorkflowDef:
        """The ``WorkflowDef`` the engine runs; raises ``InvalidInput`` for a workflow that cannot run."""
        if self._built is None:
            if not self._steps:
                raise errors.InvalidInput(f"workflow {self.name} declares no step (use @{self.name}.step)")
            specs: list[StepSpec] = []
            for declared in self._steps:
                specs.append(self._spec(declared, {s.model(): s.name for s in specs if s.output_model}))
            self._built = WorkflowDef(
                name=self.name, period=self.period, steps=tuple(specs), payload_version=self.payload_version,
                sections=(self.section,) if self.settings_model is not None else (),
                load_settings=self._load_settings, pin=self._pins)
        return self._built

    def _spec(self, declared: _Declared, earlier: Mapping[type[BaseModel] | None, str]) -> StepSpec:
        where = f"workflow {self.name}, step {declared.name}"
        try:
            hints = typing.get_type_hints(declared.fn)
        except Exception as exc:  # an annotation naming something undefined
            raise errors.InvalidInput(f"{where}: cannot resolve its annotations ({exc})") from exc
        params = list(inspect.signature(declared.fn).parameters.values())
        if not params:
            raise errors.InvalidInput(f"{where}: the first parameter must take the StepContext")
        injected: dict[str, Callable[[StepContext], Any]] = {}
        for param in params[1:]:
            annotation = hints.get(param.name)
            child_output = _child_result_model(annotation)
            inputs_model = self.inputs_model
            if self.settings_model is not None and annotation is self.settings_model:
                injected[param.name] = _settings_of
            elif inputs_model is not None and annotation == inputs_model:
                injected[param.name] = _inputs_of(inputs_model)
            elif child_output is not None:
                injected[param.name] = _children_of(annotation, child_output)
            elif isinstance(annotation, type) and issubclass(annotation, BaseModel) and annotation in earlier:
                injected[param.name] = _output_of(annotation, earlier[annotation])
            else:
                raise errors.InvalidInput(
                    f"{where}: parameter '{param.name}' must be annotated with the settings model, the inputs "
                    f"model, list[ChildResult[Model]] or the output model of an earlier step "
                    f"(got {getattr(annotation, '__name__', annotation)})")
        if declared.child is not None:
            return StepSpec(name=declared.name, run=_fan_out(declared.fn, injected, declared.child),
                            timeout_s=declared.timeout_s)
        returned = hints.get("return")
        model = declared.output or (returned if _is_model(returned) else None)
        if model is not None and model in earlier:
            raise errors.InvalidInput(f"{where}: output model {model.__name__} is already the output of "
                                      f"{earlier[model]}; give each step its own model")
        return StepSpec(name=declared.name, run=_adapt(declared.fn, injected), timeout_s=declared.timeout_s,
                        optional=declared.optional, output_model=model, retry_on=declared.retry_on,
                        retry_budget_s=declared.retry_budget_s)

    def _load_settings(self, raw: Mapping[str, Any], base_dir: Path) -> Any:
        if self.settings_model is None:
            return None
        section = raw.get(self.section, {})
        if not isinstance(section, Mapping):
            raise errors.ConfigInvalid("must be a table", key=self.section)
        try:
            settings = self.settings_model.model_validate(dict(section))
        except ValidationError as exc:
            raise problems.problem_from_validation(exc, None, prefix=(self.section,)) from exc
        # Relative paths in the settings are relative to the config file's folder, like the store's.
        relative = {name: base_dir / value for name, value in settings if isinstance(value, Path)
                    and not value.is_absolute()}
        return settings.model_copy(update=relative) if relative else settings

    def _pins(self, settings: Any, project: str) -> dict[str, Any]:
        return dict(self._pin(settings, project)) if self._pin is not None else {}


def _settings_of(ctx: StepContext) -> Any:
    return ctx.settings


def _output_of(model: type[BaseModel], step: str) -> Callable[[StepContext], BaseModel]:
    def read(ctx: StepContext) -> BaseModel:
        return ctx.output(model, step)

    return read


def _inputs_of(model: type[BaseModel]) -> Callable[[StepContext], BaseModel]:
    def read(ctx: StepContext) -> BaseModel:
        return contract.parse_output(model, dict(ctx.inputs), "this run's inputs")

    return read


def _child_result_model(annotation: Any) -> type[BaseModel] | None:
    """``Out`` for an annotation ``list[ChildResult[Out]]``, else None."""
    if typing.get_origin(annotation) is not list or len(typing.get_args(annotation)) != 1:
        return None
    item = typing.get_args(annotation)[0]
    metadata = getattr(item, "__pydantic_generic_metadata__", None)
    if not metadata or metadata.get("origin") is not ChildResult or not metadata.get("args"):
        return None
    model = metadata["args"][0]
    return model if _is_model(model) else None


def _children_of(annotation: Any, model: type[BaseModel]) -> Callable[[StepContext], list[Any]]:
    result_type = typing.get_args(annotation)[0]

    def read(ctx: StepContext) -> list[Any]:
        found = []
        for child in ctx.children():
            output = None
            if child.succeeded and child.outputs:
                last = list(child.outputs.values())[-1]
                output = contract.parse_output(model, dict(last), f"the output of child run {child.key}")
            found.append(result_type(name=child.name, run_id=child.run_id, key=child.key, project=child.project,
                                     status=child.status, error_code=child.error_code,
                                     error_message=child.error_message, output=output))
        return found

    return read


def _fan_out(fn: Callable[..., Any], injected: Mapping[str, Callable[[StepContext], Any]], child: str) -> StepFn:
    """A fan-out step: each ``name -> inputs`` the function returns becomes a child run of ``child``."""
    def run(ctx: StepContext) -> StepResult:
        wanted = fn(ctx, **{name: read(ctx) for name, read in injected.items()})
        if not isinstance(wanted, Mapping):
            raise errors.StepError("OUTPUT_INVALID", f"a fan-out step returned a {type(wanted).__name__}; return "
                                   "{child name: inputs model}", retryable=False)
        for name, inputs in wanted.items():
            data = inputs.model_dump(mode="json") if isinstance(inputs, BaseModel) else dict(inputs)
            ctx.start_child(str(name), child, data)
        return StepResult(output={"children": [str(name) for name in wanted], "workflow": child})

    run.__name__ = getattr(fn, "__name__", "fan_out")
    return run


def _adapt(fn: Callable[..., Any], injected: Mapping[str, Callable[[StepContext], Any]]) -> StepFn:
    """The engine's ``StepFn`` for a decorated function: inject its arguments, normalise its result."""
    def run(ctx: StepContext) -> StepResult:
        return _as_result(fn(ctx, **{name: read(ctx) for name, read in injected.items()}))

    run.__name__ = getattr(fn, "__name__", "step")
    run.__qualname__ = getattr(fn, "__qualname__", run.__name__)
    return run
