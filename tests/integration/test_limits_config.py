"""``[limits] max_running``, ``[limits.workflows]`` and a schedule's ``priority`` (SPEC §18): a bad value is
refused with the key that is wrong, exit 2, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_cli

SCHEDULE = '[[schedules]]\nname = "hourly"\nworkflow = "echo"\nproject = "p1"\ncron = "0 * * * *"\ntimezone = "UTC"\n'


@pytest.mark.parametrize(("text", "said"), [
    ("[limits]\nmax_running = 0\n", "limits.max_running: 0: must be at least 1"),
    ('[limits]\nmax_running = "2"\n', "limits.max_running: '2': must be a whole number"),
    ("[limits.workflows]\necho = 0\n", "limits.workflows.echo: 0: must be at least 1"),
    ("[limits.workflows]\nnosuch = 1\n", "limits.workflows.nosuch: unknown workflow 'nosuch' (known: "),
    (SCHEDULE + 'priority = "urgent"\n',
     "schedules[0].priority: 'urgent': must be one of 'critical', 'high', 'normal' or 'low'"),
], ids=["zero", "text", "zero_for_a_workflow", "unknown_workflow", "unknown_priority"])
def test_a_bad_limit_or_priority_exits_2_and_writes_nothing(tmp_path: Path, text: str, said: str) -> None:
    database = tmp_path / "rf.db"
    config = tmp_path / "reportflow.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{database}"\n\n{text}')
    done = run_cli("schedules", "apply", config=config)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr, done.stderr
    assert not database.exists()


def test_limits_and_a_priority_that_are_valid_are_taken(tmp_path: Path) -> None:
    config = tmp_path / "reportflow.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "rf.db"}"\n\n[limits]\nmax_running = 4\n\n'
                      f'[limits.workflows]\necho = 2\n\n{SCHEDULE}priority = "critical"\n')
    done = run_cli("schedules", "apply", config=config)
    assert done.returncode == 0, done.stderr
    shown = run_cli("schedules", "show", "hourly", "--json", config=config)
    assert '"priority": "critical"' in shown.stdout, shown.stdout
