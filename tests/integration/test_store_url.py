"""One store URL for every command: a relative REPORTFLOW_DB resolves against the config's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_cli, write_config

pytestmark = pytest.mark.slow  # real CLI processes: in the full suite, not in --fast


def test_db_upgrade_and_backup_find_a_relative_reportflow_db_beside_the_config(tmp_path: Path) -> None:
    project = tmp_path / "project"
    elsewhere = tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    config = write_config(project / "reportflow.toml")
    env = {"REPORTFLOW_DB": "sqlite:///state/rf.db"}
    (project / "state").mkdir()

    upgraded = run_cli("db", "upgrade", config=config, env=env, cwd=elsewhere)
    assert upgraded.returncode == 0, upgraded.stderr
    assert (project / "state" / "rf.db").is_file()
    assert not (elsewhere / "state").exists()

    listed = run_cli("runs", "list", config=config, env=env, cwd=elsewhere)  # the same database as `db upgrade`
    assert listed.returncode == 0, listed.stderr

    backed = run_cli("db", "backup", str(tmp_path / "copy.db"), config=config, env=env, cwd=elsewhere)
    assert backed.returncode == 0, backed.stderr
    assert str(project / "state" / "rf.db") in backed.stdout
    assert (tmp_path / "copy.db").is_file()
