"""``reportflow cycle``: one pass of tick, reconcile and work until idle; its fast path only when idle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import run_cli, write_config

pytestmark = pytest.mark.slow  # real CLI processes: in the full suite, not in --fast

APPLIED_AT = "2026-03-02T10:00:30Z"


def _config(tmp_path: Path) -> Path:
    (tmp_path / "repo").mkdir()
    return write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}",
                        projects=[dict(key="repo", repo="repo")],
                        schedules=[dict(name="echo-hourly", workflow="echo", project="repo", cron="0 * * * *",
                                        timezone="UTC")])


def _cycle(config: Path, now: str) -> Any:
    done = run_cli("cycle", "--json", config=config, now=now)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_cycle_creates_and_executes_what_is_due_and_an_idle_one_after_it_does_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert run_cli("schedules", "apply", config=config, now=APPLIED_AT).returncode == 0

    idle = _cycle(config, APPLIED_AT)  # the full path (it records the config's fingerprint)
    assert idle["tick"]["runs_created"] == 0 and idle["runs"] == []

    due = _cycle(config, "2026-03-02T11:00:05Z")  # the 11:00 slot is due: the fast path must not answer
    assert due["tick"]["runs_created"] == 1
    assert [run["status"] for run in due["runs"]] == ["SUCCESS"]

    again = _cycle(config, "2026-03-02T11:00:10Z")
    assert again["tick"]["runs_created"] == 0 and again["runs"] == []


def test_a_queued_run_is_worked_even_when_nothing_is_due(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert run_cli("schedules", "apply", config=config, now=APPLIED_AT).returncode == 0
    assert _cycle(config, APPLIED_AT)["runs"] == []  # records the fingerprint: the next idle cycle is fast
    triggered = run_cli("trigger", "echo-hourly", config=config, now=APPLIED_AT)
    assert triggered.returncode == 0, triggered.stderr

    worked = _cycle(config, APPLIED_AT)

    assert worked["tick"]["due_schedules"] == 0
    assert [run["status"] for run in worked["runs"]] == ["SUCCESS"]


def test_work_until_idle_still_works_a_queued_run_once_the_config_is_known(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert run_cli("schedules", "apply", config=config, now=APPLIED_AT).returncode == 0
    assert run_cli("tick", config=config, now=APPLIED_AT).returncode == 0  # records the fingerprint
    assert run_cli("trigger", "echo-hourly", config=config, now=APPLIED_AT).returncode == 0

    worked = run_cli("work", "--until-idle", config=config, now=APPLIED_AT)

    assert worked.returncode == 0, worked.stderr
    assert "SUCCESS" in worked.stdout
    idle = run_cli("work", "--until-idle", config=config, now=APPLIED_AT)
    assert idle.stdout == "nothing to do\n"
