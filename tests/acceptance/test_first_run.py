"""What a new user does first: the demo on this repository's history, and `init` on their own."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support import REPO_ROOT, run_cli

pytestmark = pytest.mark.slow


def test_the_demo_config_reports_on_this_repository(tmp_path: Path) -> None:
    """scripts/demo.sh without the venv set-up: a clone, the demo config, backfill, work."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    shutil.copy(REPO_ROOT / "examples" / "demo.toml", clone / "examples" / "demo.toml")
    config = clone / "examples" / "demo.toml"
    first_day = subprocess.run(["git", "log", "--reverse", "--date=short", "--format=%ad"], cwd=clone,
                               capture_output=True, text=True, check=True).stdout.split()[0]
    today = datetime.now(UTC).date().isoformat()
    assert run_cli("schedules", "apply", config=config).returncode == 0
    for name in ("reportflow-daily", "reportflow-weekly"):
        result = run_cli("backfill", name, "--from", first_day, "--to", today, config=config)
        assert result.returncode == 0, result.stderr
    worked = run_cli("work", "--until-idle", config=config)
    assert worked.returncode == 0, worked.stderr
    runs = json.loads(run_cli("runs", "list", "--json", config=config).stdout)
    assert runs and {r["status"] for r in runs} == {"SUCCESS"}
    reports = sorted((clone / "reports" / "reportflow").glob("*.md"))
    assert any("-daily-summary" in p.name for p in reports) and any("-weekly-summary" in p.name for p in reports)
    assert "# Daily report: reportflow" in next(p for p in reports if "daily" in p.name).read_text()
    # A second pass creates nothing and rewrites nothing.
    before = {p: p.read_bytes() for p in reports}
    again = run_cli("backfill", "reportflow-daily", "--from", first_day, "--to", today, "--json", config=config)
    assert json.loads(again.stdout)["created"] == []
    assert run_cli("work", "--until-idle", config=config).returncode == 0
    assert {p: p.read_bytes() for p in sorted((clone / "reports" / "reportflow").glob("*.md"))} == before


def test_init_writes_a_config_that_runs(tmp_path: Path) -> None:
    repo = tmp_path / "my-service"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(repo)], check=True)
    config = tmp_path / "reportflow.toml"
    made = run_cli("init", "--repo", str(repo), "--timezone", "Asia/Seoul", config=config)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / ".reportflow" / "reportflow.db").exists()
    text = config.read_text()
    assert 'key = "my-service"' in text and 'timezone = "Asia/Seoul"' in text
    assert run_cli("init", "--repo", str(repo), config=config).returncode == 2  # never overwrites silently
    applied = run_cli("schedules", "apply", config=config)
    assert "created: my-service-daily, my-service-weekly" in applied.stdout
    listed = json.loads(run_cli("schedules", "list", "--json", config=config).stdout)
    assert [s["next_run_local"][-6:] for s in listed] == ["+09:00", "+09:00"]
    assert run_cli("trigger", "my-service-weekly", config=config).returncode == 0
    assert run_cli("work", "--until-idle", config=config).returncode == 0
    (run,) = json.loads(run_cli("runs", "list", "--json", config=config).stdout)
    assert run["status"] == "SUCCESS" and run["trigger"] == "MANUAL"
