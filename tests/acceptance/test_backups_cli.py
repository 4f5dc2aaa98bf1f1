"""Scheduled backups through the real CLI: processes racing on one slot take one backup; an idle ``cycle``
still takes the next slot's; ``doctor`` shows the newest's age."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

from tests.support import CLI, REPO_ROOT, run_cli

CONFIG = """\
[store]
url = "sqlite:///rf.db"
backup = {{ cron = "0 3 * * *", dir = "backups", keep = {keep} }}
"""


def _config(tmp_path: Path, keep: int = 2) -> Path:
    path = tmp_path / "reportflow.toml"
    path.write_text(CONFIG.format(keep=keep))
    return path


def _rows(tmp_path: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(tmp_path / "rf.db")) as conn:
        return list(conn.execute("SELECT slot_at, status FROM backups ORDER BY slot_at"))


def test_four_cycles_racing_on_one_slot_take_one_backup_and_the_next_slot_its_own(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert run_cli("db", "upgrade", config=config).returncode == 0
    env = {"PYTHONPATH": str(REPO_ROOT)}
    racers = [subprocess.Popen([*CLI, "--config", str(config), "--now", "2026-09-29T03:01:00Z", "cycle"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                               env={**os.environ, **env}) for _ in range(4)]
    for proc in racers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert [p.name for p in (tmp_path / "backups").iterdir()] == ["reportflow-20260929T030000Z.db"]
    assert [status for _, status in _rows(tmp_path)] == ["VERIFIED"]
    # A minute later nothing is due: a cycle (its fast path, once a full pass recorded the config) takes none.
    for minute in ("02", "03"):
        done = run_cli("cycle", config=config, now=f"2026-09-29T03:{minute}:00Z")
        assert done.returncode == 0, done.stderr
    assert len(_rows(tmp_path)) == 1
    # The next day's slot: an otherwise idle cycle takes it.
    done = run_cli("cycle", config=config, now="2026-09-30T03:00:30Z")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "backups").iterdir()) == [
        "reportflow-20260929T030000Z.db", "reportflow-20260930T030000Z.db"]
    doctor = run_cli("doctor", config=config, now="2026-09-30T04:00:30Z")
    # --now starts a clock that then runs in real time: the cycle's backup was verified a few seconds after 03:00:30.
    assert re.search(r"newest verified backup .*20260930T030000Z.db is (59m|1h) old", doctor.stdout), doctor.stdout


def test_a_bad_backup_table_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "reportflow.toml"
    config.write_text('[store]\nurl = "sqlite:///rf.db"\nbackup = { cron = "0 3 * * *", dir = "b", keep = 0 }\n')
    done = run_cli("cycle", config=config)
    assert done.returncode == 2 and "store.backup.keep" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reportflow.toml"]
