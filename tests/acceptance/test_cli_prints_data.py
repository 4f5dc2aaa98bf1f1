"""The terminal prints data as data (issue 36, item 15): a project named ``ghost`` (its keys hold
``:ghost:``, which rich turned into an emoji), a branch and an error holding ``[bold]`` markup, and a
user name with markup and a terminal escape, through ``runs list``, ``runs show``, ``notifications
list`` and ``schedules history``. ``USER='x[/]'`` used to make every later history crash on rich's
markup, for good."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.fakes.gitrepo import make_repo
from tests.support import run_cli, write_config

pytestmark = pytest.mark.slow

ACTOR = "x[/] [bold]boss[/] :ghost: \x1b]0;PWNED\x07\u202e"
NOW = "2026-09-30T04:00:00Z"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_names_keys_errors_and_actors_print_as_written(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, "repo")
    repo.commit("[bold]loud[/] :ghost: subject", at=datetime(2026, 9, 29, 12, 0, tzinfo=UTC))
    config = write_config(
        tmp_path / "rf.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}",
        sections={"reports": {"dir": str(tmp_path / "reports")}, "worker": {"max_attempts": 1}},
        projects=[{"key": "ghost", "repo": str(repo.path), "branches": ["[bold]gone[/]"]},
                  {"key": "spooky", "repo": str(repo.path), "branches": ["main"]}],
        schedules=[{"name": "ghost-daily", "workflow": "daily_report", "project": "ghost", "cron": "0 3 * * *",
                    "timezone": "UTC"},
                   {"name": "spooky-daily", "workflow": "daily_report", "project": "spooky",
                    "cron": "0 3 * * *", "timezone": "UTC"}])
    user = {"USER": ACTOR, "LOGNAME": ACTOR}

    def cli(*args: str) -> str:
        result = run_cli(*args, config=config, now=NOW, env=user)
        assert result.returncode == 0, f"{args}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
        assert not RAW.search(result.stdout + result.stderr), args
        assert "\U0001f47b" not in result.stdout, args  # no :ghost: became an emoji
        return " ".join(result.stdout.split())  # tables wrap long cells

    cli("schedules", "apply")
    cli("schedules", "set", "ghost-daily", "--cron", "0 4 * * *", "--expect-version", "1")
    cli("trigger", "spooky-daily", "--date", "2026-09-29")
    cli("trigger", "ghost-daily", "--date", "2026-09-29")
    cli("work", "--until-idle")

    listed = cli("runs", "list")
    assert "ghost-daily 2026-09-29" in listed and "spooky-daily 2026-09-29" in listed
    shown = cli("runs", "show", "2")
    assert "run 2 daily_report:ghost:2026-09-29 FAILED" in shown
    assert "has no commit at branch '[bold]gone[/]'" in shown  # the error, as written
    assert '["[bold]gone[/]"]' in shown  # the pinned branches
    history = cli("schedules", "history", "ghost-daily")
    assert history.count("x[/] [bold]boss[/] :ghost: ]0;PWNED") == 3  # create, set, run_manual
    alerts = cli("notifications", "list")
    assert "run 2 daily_report:ghost:2026-09-29 failed at COLLECT_GIT: CONFIG_INVALID" in alerts
