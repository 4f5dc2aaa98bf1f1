"""The kill switch through the real CLI (SPEC §15.3): held runs in `runs list/show --json`, refusals exit 3."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.support import run_cli, write_config

NOW = "2026-10-01T12:00:00Z"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_disable_holds_and_refuses_then_enable_releases(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", schedules=[
        dict(name="cd", workflow="echo", project="p", cron="0 9 * * *", timezone="UTC")])
    assert run_cli("schedules", "apply", config=config, now=NOW).returncode == 0
    assert run_cli("backfill", "cd", "--from", "2026-09-28", "--to", "2026-09-29", config=config,
                   now=NOW).returncode == 0
    assert run_cli("schedules", "disable", "cd", config=config, now=NOW).returncode == 2  # --reason is required
    off = run_cli("schedules", "disable", "cd", "--reason", "repo move", config=config, now=NOW)
    assert off.returncode == 0, off.stderr
    listed = json.loads(run_cli("runs", "list", "--json", config=config, now=NOW).stdout)
    assert [(r["status"], r["held"]) for r in listed] == [("QUEUED", "schedule disabled")] * 2
    shown = json.loads(run_cli("runs", "show", str(listed[0]["id"]), "--json", config=config, now=NOW).stdout)
    assert shown["held"] == "schedule disabled"
    db = tmp_path / ".reportflow" / "reportflow.db"
    before = _digest(db)
    for args in (["trigger", "cd", "--date", "2026-09-30"], ["backfill", "cd", "--from", "2026-09-25", "--to",
                                                             "2026-09-26"], ["runs", "retry", str(listed[0]["id"])]):
        refused = run_cli(*args, config=config, now=NOW)
        assert refused.returncode == 3, (args, refused.stdout, refused.stderr)
        assert "schedule 'cd' is disabled" in refused.stderr
        assert _digest(db) == before
    assert run_cli("work", "--until-idle", config=config, now=NOW).returncode == 0
    still = json.loads(run_cli("runs", "list", "--json", config=config, now=NOW).stdout)
    assert [r["status"] for r in still] == ["QUEUED"] * 2  # the worker claimed nothing
    assert run_cli("schedules", "enable", "cd", config=config, now=NOW).returncode == 0
    assert run_cli("work", "--until-idle", config=config, now=NOW).returncode == 0
    listed = json.loads(run_cli("runs", "list", "--json", config=config, now=NOW).stdout)
    assert [(r["status"], r["held"]) for r in listed] == [("SUCCESS", None)] * 2


def test_disable_all_with_cancel_queued(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", schedules=[
        dict(name="a", workflow="echo", project="p1", cron="0 9 * * *", timezone="UTC"),
        dict(name="b", workflow="echo", project="p2", cron="0 9 * * *", timezone="UTC")])
    assert run_cli("schedules", "apply", config=config, now=NOW).returncode == 0
    assert run_cli("trigger", "a", "--date", "2026-09-30", config=config, now=NOW).returncode == 0
    assert run_cli("schedules", "disable", "a", "--all", "--reason", "x", config=config, now=NOW).returncode == 2
    off = run_cli("schedules", "disable", "--all", "--cancel-queued", "--reason", "incident", config=config, now=NOW)
    assert off.returncode == 0 and "disabled 2 schedule(s): a, b" in off.stdout, off.stderr
    listed = json.loads(run_cli("runs", "list", "--json", config=config, now=NOW).stdout)
    assert [(r["status"], r["held"]) for r in listed] == [("CANCELLED", None)]
