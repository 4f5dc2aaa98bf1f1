"""``[[workflows]]``: files and modules beside the installed entry points, and the authoring builder's checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from engine.core import errors
from engine.core.models import PeriodKind
from engine.plugins import workflow_registry
from engine.plugins.authoring import StepContext, Workflow
from tests.support import write_config

ONE_STEP = '''
from engine.plugins.authoring import Workflow
wf = Workflow("{name}", period="week")

@wf.step(timeout="1m")
def only(ctx):
    return None
'''


def config_with(tmp: Path, *entries: str, flow: str | None = None, name: str = "nightly") -> Path:
    if flow is not None:
        (tmp / "flows").mkdir(exist_ok=True)
        (tmp / "flows" / flow).write_text(ONE_STEP.format(name=name))
    path = write_config(tmp / "reportflow.toml", db_url=f"sqlite:///{tmp / 'rf.db'}")
    path.write_text(path.read_text() + "".join(f"\n[[workflows]]\n{entry}\n" for entry in entries))
    return path


def test_a_file_relative_to_the_config_and_a_module_load_with_their_origins(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    config = config_with(tmp_path, 'path = "flows/nightly.py"', 'module = "tests.flows.authored:HELLO"',
                         flow="nightly.py")
    monkeypatch.chdir("/")  # relative to the config's folder, not the working directory
    cfg, reg = workflow_registry.load_with_config(config)
    assert reg["nightly"].origin == f"file {tmp_path / 'flows' / 'nightly.py'}"
    assert reg["nightly"].period is PeriodKind.WEEK and reg["nightly"].step_names() == ("ONLY",)
    hello = reg["hello"]
    assert (hello.origin, hello.payload_version, hello.steps[0].optional) == (
        "module tests.flows.authored:HELLO", 2, True)
    assert hello.steps[0].timeout_s == 5 and hello.steps[0].model_name() == "Greeting"
    assert {"daily_report", "weekly_report", "echo"} <= set(reg)  # installed ones are still there


def test_a_file_workflow_named_like_an_installed_one_is_refused_naming_both(tmp_path: Path) -> None:
    config = config_with(tmp_path, 'path = "flows/echo.py"', flow="echo.py", name="echo")
    with pytest.raises(errors.ConfigInvalid) as caught:
        workflow_registry.load_with_config(config)
    message = caught.value.message
    assert "workflows[0].path" in message and caught.value.exit_code == 2
    assert f"file {tmp_path / 'flows' / 'echo.py'}" in message and "entry point echo = workflows.echo:WORKFLOW" in message


@pytest.mark.parametrize(("entry", "expected"), [
    ('path = "flows/missing.py"', "workflows[0].path: no such file"),
    ('path = "a.py"\nmodule = "x.y"', "workflows[0]: give either path"),
    ('module = "tests.flows.nope"', "workflows[0].module: cannot load module tests.flows.nope"),
    ('module = "tests.flows.authored:NOPE"', "has no attribute NOPE"),
    ('module = "engine.core.clock"', "defines no workflow"),
    ('paht = "flows/x.py"', "workflows[0].paht: unknown key"),
])
def test_bad_workflow_sources_are_config_errors(tmp_path: Path, entry: str, expected: str) -> None:
    with pytest.raises(errors.ConfigInvalid) as caught:
        workflow_registry.load_with_config(config_with(tmp_path, entry))
    assert expected in caught.value.message


def test_a_file_that_fails_to_import_names_the_file_and_the_error(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import no_such_module_here\n")
    with pytest.raises(errors.ConfigInvalid) as caught:
        workflow_registry.load_with_config(config_with(tmp_path, 'path = "broken.py"'))
    assert "ModuleNotFoundError" in caught.value.message and "broken.py" in caught.value.message


class Later(BaseModel):
    x: int


def test_the_builder_refuses_a_parameter_no_earlier_step_provides() -> None:
    wf = Workflow("w", period="slot")

    @wf.step
    def first(ctx: StepContext, later: Later) -> None:
        return None

    with pytest.raises(errors.InvalidInput, match="parameter 'later' must be annotated"):
        wf.definition()


def test_the_builder_reads_periods_durations_and_names() -> None:
    with pytest.raises(errors.InvalidInput, match="period 'fortnight'"):
        Workflow("w", period="fortnight")
    wf = Workflow("w", period="day")
    with pytest.raises(errors.InvalidInput, match="timeout"):
        wf.step(timeout="soon")(lambda ctx: None)
    with pytest.raises(errors.InvalidInput, match="declares no step"):
        wf.definition()
