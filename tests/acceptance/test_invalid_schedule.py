"""One invalid schedule in the file: reading history and the other schedules go on; `apply` still refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import run_cli, write_config

pytestmark = pytest.mark.slow

GOOD = dict(name="good", workflow="echo", project="p", cron="0 * * * *", timezone="UTC")


def test_read_commands_and_the_scheduler_go_on_and_say_so_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "reportflow.toml"
    config = write_config(path, db_url=f"sqlite:///{tmp_path / 'rf.db'}", schedules=[GOOD])
    assert run_cli("schedules", "apply", config=config, now="2026-09-29T08:30:00Z").returncode == 0
    broken = dict(GOOD, name="broken", project="q", cron="61 * * * *")
    write_config(path, db_url=f"sqlite:///{tmp_path / 'rf.db'}", schedules=[GOOD, broken])
    ticked = run_cli("tick", config=config, now="2026-09-29T09:00:30Z")
    assert ticked.returncode == 0, ticked.stderr
    assert "schedule 'broken' is left out, it is invalid" in ticked.stderr and "minute must be 0-59" in ticked.stderr
    assert len([line for line in ticked.stderr.splitlines() if "left out" in line]) == 1
    listed = run_cli("runs", "list", "--json", config=config, now="2026-09-29T09:01:00Z")
    assert listed.returncode == 0 and [r["schedule"] for r in json.loads(listed.stdout)] == ["good"]
    refused = run_cli("schedules", "apply", config=config, now="2026-09-29T09:02:00Z")
    assert refused.returncode == 2 and "schedules[1].cron" in refused.stderr
