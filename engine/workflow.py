"""The workflow contract between the engine and the code that plugs into it.

A workflow declares its business period, its payload version and its ordered
steps; the engine never knows what a step does. Workflows are found through
the ``reportflow.workflows`` entry-point group (see ``engine.registry``).

A step receives a ``StepContext`` (the run's pinned inputs and the persisted
outputs of earlier steps) and returns a ``StepResult`` whose ``output`` is
committed together with the step's SUCCESS. Steps must make their external
effects idempotent and call ``ctx.check_fence()`` right before each one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.models import PeriodKind, StepStatus


@dataclass(frozen=True)
class ArtifactRef:
    """An external effect of a step: (kind, location) identifies it within a run."""

    kind: str
    location: str
    sha256: str | None = None
    external_id: str | None = None


@contextmanager
def _no_mutex(name: str) -> Iterator[None]:
    yield


@dataclass(frozen=True)
class StepContext:
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
    settings: Any
    check_fence: Callable[[], None]
    # This step's own output from an earlier execution (a re-run after --from-step), if any.
    previous_output: Mapping[str, Any] | None = None
    # A mutex shared by every worker on the store (e.g. one generation per Ollama host).
    exclusive: Callable[[str], AbstractContextManager[None]] = _no_mutex


@dataclass(frozen=True)
class StepResult:
    """What a step hands back.

    ``pins`` are merged into the run's pinned inputs, but only for keys not yet
    pinned (first collect wins, for ever). ``skip_remaining`` ends the run
    SUCCESS with the later steps SKIPPED for that reason.
    """

    output: dict[str, Any] = field(default_factory=dict)
    status: StepStatus = StepStatus.SUCCESS
    pins: dict[str, Any] = field(default_factory=dict)
    artifacts: tuple[ArtifactRef, ...] = ()
    skip_remaining: str | None = None


StepFn = Callable[[StepContext], StepResult]


@dataclass(frozen=True)
class StepSpec:
    """One ordered step. ``optional``: a permanent failure after earlier steps
    succeeded ends the run PARTIAL_SUCCESS rather than FAILED. ``inline``: a quick
    step without blocking I/O runs on the worker's own thread, skipping the hand-off
    to the step thread; it cannot be abandoned mid-way, so its timeout is checked
    when it returns (an overrun still fails ``STEP_TIMEOUT`` and its result is dropped)."""

    name: str
    run: StepFn
    timeout_s: float = 600.0
    optional: bool = False
    inline: bool = False


@dataclass(frozen=True)
class Finding:
    """One line of ``reportflow doctor``: what was checked, and whether a person must act."""

    check: str
    message: str
    problem: bool = False
    warning: bool = False  # worth a look, but nothing is broken (doctor still exits 0)


def _no_settings(raw: Mapping[str, Any], base_dir: Path) -> None:
    return None


def _no_pins(settings: Any, project: str) -> dict[str, Any]:
    return {}


def _check_nothing(settings: Any, project: str) -> None:
    return None


def _serves_all(settings: Any, project: str) -> bool:
    return True


def _nothing_to_diagnose(settings: Any, projects: Sequence[str], artifacts: Sequence[Any]) -> list[Finding]:
    return []


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
    - ``diagnose(settings, projects, artifacts)`` returns doctor findings for the
      workflow's own dependencies (repositories, model server, destinations) and
      its external artifacts (``ArtifactRecord`` of successful runs).
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

    def step_names(self) -> tuple[str, ...]:
        return tuple(step.name for step in self.steps)

    def step(self, name: str) -> StepSpec:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)
