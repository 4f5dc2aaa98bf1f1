"""A failed run's runbook line, from the error-code table, in `runs show` and `doctor`."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from engine.core import error_codes
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.read import doctor
from tests.fakes.gitrepo import GitRepo
from tests.integration.test_report_workflow import platform_runtime
from tests.integration.test_report_workflow import repo as repo  # noqa: F401 - the fixture
from tests.support import RuntimeFactory, run_cli, run_next, write_config


def test_a_failed_run_names_what_to_do(store_url: str, tmp_path: Path, repo: GitRepo, runtime: RuntimeFactory) -> None:
    rt = platform_runtime(runtime, store_url, tmp_path, repo)
    repo.git("branch", "-m", "main", "renamed")  # the configured branch is gone
    result = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    assert run_next(Worker(rt, "w")).status is RunStatus.FAILED
    line = error_codes.runbook("CONFIG_INVALID")
    [finding] = doctor.check_failures(rt)
    assert finding.problem and finding.message == (
        f"1 run(s) FAILED with CONFIG_INVALID in the last 7 days (latest: run "
        f"{result.run_id}): {line}")
    shown = run_cli("runs", "show", str(result.run_id),
                    config=write_config(tmp_path / "reportflow.toml", db_url=store_url))
    assert shown.returncode == 0, shown.stderr
    assert f"what to do: {line}" in " ".join(shown.stdout.split())
