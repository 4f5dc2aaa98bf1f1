"""Ctrl-C is not a failure: the SIGINT a terminal sends to its whole foreground process group, mid-``git``.

The terminal signals every process of the group, ``git`` included. Before, git died of it
and the run in flight ended ``FAILED GIT_REPO_NOT_FOUND`` ("git log exited -2"). Now git
runs in a session of its own and finishes; ``work`` hands the run back and exits 130.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import stat
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.acceptance import procs
from tests.reliability.harness import daily_history, daily_schedule, report_config
from tests.support import REPO_ROOT

pytestmark = pytest.mark.slow


def slow_git(root: Path) -> Path:
    """A ``git`` that, for ``log``, says it started and waits for a ``go`` file before running the real one."""
    real = shutil.which("git")
    assert real
    script = root / "slow-git"
    script.write_text(f'''#!/bin/sh
case " $* " in
  *" log "*) touch "{root}/git-started"
             i=0; while [ ! -e "{root}/go" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
             echo "$$ alive after the wait" >> "{root}/git-survived" ;;
esac
exec "{real}" "$@"
''')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_ctrl_c_to_the_process_group_mid_git_hands_the_run_back(tmp_path: Path) -> None:
    repo = daily_history(tmp_path, datetime(2026, 9, 28, tzinfo=UTC), 2)
    config = report_config(tmp_path, db_url=f"sqlite:///{tmp_path / 'rf.db'}", repo=repo.path,
                           schedules=[daily_schedule("daily", "proj")])
    env = {"GIT_PYTHON_GIT_EXECUTABLE": str(slow_git(tmp_path))}
    now = "2026-09-30T09:00:30Z"
    assert procs.run(tmp_path, config, "schedules", "apply", now=now, env=env).returncode == 0
    assert procs.run(tmp_path, config, "trigger", "daily", "--date", "2026-09-29", now=now, env=env).returncode == 0
    log_path = tmp_path / "work.log"
    with open(log_path, "w") as log:
        # A terminal's foreground job: a process group of its own, which Ctrl-C signals as a whole.
        work = subprocess.Popen(procs.command(config, now, "work", "--until-idle"), stdout=subprocess.PIPE,
                                stderr=log, text=True, env=procs.env_for(tmp_path, env), cwd=REPO_ROOT,
                                start_new_session=True)
    procs.wait_for(lambda: (tmp_path / "git-started").exists() or work.poll() is not None, 120, "git log to start")
    assert work.poll() is None, log_path.read_text()[-3000:]
    os.killpg(work.pid, signal.SIGINT)  # what the terminal does at Ctrl-C
    (tmp_path / "go").touch()
    work.communicate(timeout=120)
    text = log_path.read_text()
    assert work.returncode == 130, text[-3000:]
    assert (tmp_path / "git-survived").exists()  # git did not get the terminal's signal
    with sqlite3.connect(tmp_path / "rf.db") as conn:
        status, error, resume = conn.execute("SELECT status, error_code, next_attempt_trigger FROM runs").fetchone()
    assert (status, error) in {("QUEUED", None), ("SUCCESS", None)}, text[-3000:]
    assert "GIT_REPO_NOT_FOUND" not in text and "run_failed" not in text
    if status == "QUEUED":  # handed back at the step boundary: the next worker resumes it
        assert resume == "handback"
        again = procs.run(tmp_path, config, "work", "--until-idle", now=now, env=env)
        assert again.returncode == 0, again.stderr[-3000:]
