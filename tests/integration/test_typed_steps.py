"""Typed step outputs and per-step retry rules, through the worker on SQLite and PostgreSQL.

The workflow is a file loaded through ``[[workflows]]``-style sources; loading
it again gives new model classes, as a resume in another process would. Its
steps append to a log file: the witness of what executed.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.core import logs
from engine.core.models import Run, RunStatus, StepStatus
from engine.execution.pool import WorkerPool
from engine.operations import actions
from engine.plugins import workflow_registry
from engine.runtime import Runtime
from engine.store import run_rows
from tests.support import ManualRuntime, RuntimeFactory

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)

FLOW = '''
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from engine.plugins.authoring import StepContext, StepError, Workflow


class Settings(BaseModel):
    log: Path = Path("calls.log")


class Count(BaseModel):
    n: int{extra_field}


class Doubled(BaseModel):
    n: int
    count_class: str


wf = Workflow("typed", period="slot", payload_version=1, settings=Settings)


def note(settings: Settings, line: str) -> None:
    with settings.log.open("a") as f:
        f.write(line + "\\n")


@wf.step(timeout="30s")
def count(ctx: StepContext, settings: Settings) -> Count:
    note(settings, "COUNT")
    return {count_returns}


@wf.step(timeout="30s", retry_on=["FLAKY"], retry_budget="{budget}")
def double(ctx: StepContext, settings: Settings, c: Count) -> Doubled:
    note(settings, "DOUBLE")
    gate = settings.log.with_name("flaky")
    if gate.exists():
        left = int(gate.read_text())
        gate.write_text(str(left - 1)) if left > 1 else gate.unlink()
        raise StepError("FLAKY", "not yet", retry_after_s={retry_after})
    assert isinstance(c, Count)  # the class of this load of the file, not of an earlier one
    return Doubled(n=c.n * 2, count_class=f"{{type(c).__module__}}.{{type(c).__name__}}")
'''


def write_flow(tmp: Path, *, count_returns: str = "Count(n=21)", budget: str = "0s",
               retry_after: str = "None", extra_field: str = "") -> Path:
    path = tmp / "typed_flow.py"
    path.write_text(FLOW.format(count_returns=count_returns, budget=budget, retry_after=retry_after,
                                extra_field=extra_field))
    return path


SPEC = dict(name="typed", workflow="typed", project="p1", cron="0 * * * *", timezone="UTC", overlap="ALLOW")


def typed(runtime: RuntimeFactory, url: str, tmp: Path, flow: Path, at: datetime) -> ManualRuntime:
    """A runtime whose workflow is the one ``flow`` defines, executed afresh (as another process would)."""
    reg = workflow_registry.load_registry([workflow_registry.Source(key="workflows[0].path", path=flow)])
    return runtime(url, schedules=[SPEC], at=at, workflows=reg, installed=False, base_dir=tmp,
                   config={"worker": {"retry_backoff": "1m"}}, apply=True)


def calls(tmp: Path) -> list[str]:
    log = tmp / "calls.log"
    return log.read_text().split() if log.exists() else []


def the_run(rt: Runtime) -> Run:
    with rt.store.read() as conn:
        (run,) = run_rows.list_runs(conn)
        return run_rows.get_run(conn, run.id)


def start(runtime: RuntimeFactory, url: str, tmp: Path, flow: Path) -> ManualRuntime:
    rt = typed(runtime, url, tmp, flow, T0)
    rt.clock.set(T0 + timedelta(minutes=1))
    actions.trigger(rt, "typed")
    return rt


def test_an_output_that_does_not_match_its_model_fails_the_step_and_commits_nothing(
        store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = start(runtime, store_url, tmp_path, write_flow(tmp_path, count_returns='{"n": "many"}'))
    WorkerPool(rt, concurrency=1).work(until_idle=True)
    run = the_run(rt)
    assert run.status is RunStatus.FAILED
    first = run.steps[0]
    assert (first.status, first.output, first.error_code) == (StepStatus.FAILED, None, "OUTPUT_INVALID")
    assert "not a valid Count: n:" in (first.error_message or "")
    assert run.attempt_count == 1  # permanent: no retry of a step that returns the wrong shape
    assert calls(tmp_path) == ["COUNT"]  # DOUBLE never ran


def test_a_resumed_step_gets_the_committed_model_parsed_by_a_fresh_load_of_the_workflow(
        store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    flow = write_flow(tmp_path)
    (tmp_path / "flaky").write_text("1")
    rt = start(runtime, store_url, tmp_path, flow)
    WorkerPool(rt, concurrency=1).work(until_idle=True)
    assert the_run(rt).status is RunStatus.RETRY_PENDING  # FLAKY is retryable for this step
    assert the_run(rt).steps[0].output == {"n": 21}  # stored as JSON

    # Another "process": the file is executed again, so Count is a new class.
    later = typed(runtime, store_url, tmp_path, flow, rt.clock.now() + timedelta(minutes=5))
    WorkerPool(later, concurrency=1).work(until_idle=True)
    run = the_run(later)
    assert run.status is RunStatus.SUCCESS
    output = run.steps[1].output or {}
    assert output == {"n": 42, "count_class": output["count_class"]} and output["count_class"].endswith(".Count")
    assert calls(tmp_path) == ["COUNT", "DOUBLE", "DOUBLE"]  # COUNT ran once


def test_a_stored_output_of_another_shape_is_refused_not_misread(store_url: str, tmp_path: Path,
                                                                 runtime: RuntimeFactory) -> None:
    (tmp_path / "flaky").write_text("1")
    rt = start(runtime, store_url, tmp_path, write_flow(tmp_path))
    WorkerPool(rt, concurrency=1).work(until_idle=True)
    # The model changed shape without a new payload version: reading the old output must fail loudly.
    changed = write_flow(tmp_path, count_returns="Count(n=21, label='x')", extra_field="\n    label: str")
    later = typed(runtime, store_url, tmp_path, changed, rt.clock.now() + timedelta(minutes=5))
    WorkerPool(later, concurrency=1).work(until_idle=True)
    run = the_run(later)
    assert (run.status, run.steps[1].error_code) == (RunStatus.FAILED, "OUTPUT_INVALID")
    assert "stored output of COUNT is not a valid Count: label" in (run.steps[1].error_message or "")


def test_the_in_step_retry_budget_retries_within_one_attempt(sqlite_url: str, tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture,
                                                             runtime: RuntimeFactory) -> None:
    caplog.set_level(logging.INFO, logger="engine.execution.step_call")
    (tmp_path / "flaky").write_text("2")
    rt = start(runtime, sqlite_url, tmp_path, write_flow(tmp_path, budget="30s"))
    before = rt.clock.now()
    WorkerPool(rt, concurrency=1).work(until_idle=True)
    run = the_run(rt)
    assert (run.status, run.attempt_count) == (RunStatus.SUCCESS, 1)
    assert calls(tmp_path) == ["COUNT", "DOUBLE", "DOUBLE", "DOUBLE"]
    waited = rt.clock.now() - before
    assert timedelta(0) < waited <= timedelta(seconds=30)  # waited, within the budget
    retried = [getattr(r, logs.FIELDS_ATTR) for r in caplog.records
               if getattr(r, logs.EVENT_ATTR, None) == "step_retrying"]
    assert [(r["run"], r["step"]) for r in retried] == [(run.id, "DOUBLE")] * 2
    assert abs(sum(r["in_s"] for r in retried) - waited.total_seconds()) < 0.05  # the waits ran on the engine's clock


def test_a_retry_after_beyond_the_budget_goes_to_the_run_level(sqlite_url: str, tmp_path: Path,
                                                               runtime: RuntimeFactory) -> None:
    (tmp_path / "flaky").write_text("1")
    rt = start(runtime, sqlite_url, tmp_path, write_flow(tmp_path, budget="30s", retry_after="600"))
    WorkerPool(rt, concurrency=1).work(until_idle=True)
    run = the_run(rt)
    assert run.status is RunStatus.RETRY_PENDING
    assert run.not_before is not None and run.not_before >= rt.clock.now() + timedelta(seconds=590)
    assert calls(tmp_path) == ["COUNT", "DOUBLE"]  # no in-step wait of 600s


def test_without_retry_on_the_code_is_permanent(sqlite_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    flow = write_flow(tmp_path)
    flow.write_text(flow.read_text().replace('retry_on=["FLAKY"]', "retry_on=[]"))
    (tmp_path / "flaky").write_text("1")
    rt = start(runtime, sqlite_url, tmp_path, flow)
    WorkerPool(rt, concurrency=1).work(until_idle=True)
    run = the_run(rt)
    assert (run.status, run.steps[1].error_code) == (RunStatus.FAILED, "FLAKY")
