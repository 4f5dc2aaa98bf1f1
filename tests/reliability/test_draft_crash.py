"""`schedules draft --write` SIGKILLed while it writes (SPEC §16.2): the config file is the old
bytes or the old bytes plus the block, never half of it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.integration.test_schedules_draft import BASE
from tests.support import CLI, REPO_ROOT

SENTENCE = "every day at 07:00 for api"
BLOCK_START = b'\n[[schedules]]\nname = "api-daily"'


def start(path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("REPORTFLOW_NOW", None)
    return subprocess.Popen([*CLI, "--config", str(path), "schedules", "draft", SENTENCE,
                             "--write", "--yes"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_a_kill_during_the_write_leaves_the_old_file_and_a_finished_write_the_new(
        tmp_path: Path) -> None:
    path = tmp_path / "reportflow.toml"
    # Large enough (a long comment) that writing and syncing the copy takes a while.
    filler = ("# " + "x" * 1022 + "\n") * (48 * 1024)
    path.write_text(BASE.format(db=tmp_path / "state.db", provider="builtin", host="x") + filler)
    before = path.read_bytes()

    killed_mid_write = 0
    for _ in range(3):
        proc = start(path)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if any(p.name.endswith(".draft") for p in tmp_path.iterdir()):
                os.kill(proc.pid, signal.SIGKILL)
                killed_mid_write += 1
                break
        proc.wait(timeout=60)
        assert path.read_bytes() == before
        for leftover in tmp_path.glob(".reportflow.toml.*.draft"):
            leftover.unlink()
    assert killed_mid_write == 3  # every kill landed while the temporary copy existed

    done = start(path)
    assert done.wait(timeout=120) == 0, done.stderr.read() if done.stderr else ""
    after = path.read_bytes()
    assert after.startswith(before) and after[len(before):].startswith(BLOCK_START)
    assert not list(tmp_path.glob("*.draft")) and not (tmp_path / "state.db").exists()
