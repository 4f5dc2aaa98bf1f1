"""`schedules draft --write` SIGKILLed while it writes (SPEC §16.2): the config file is the old
bytes or the old bytes plus the block, never half of it; two writers at once both land."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.integration.test_schedules_draft import BASE
from tests.support import CLI, REPO_ROOT

SENTENCE = "every day at 07:00 for api"
BLOCK_START = b'\n[[schedules]]\nname = "api-daily"'


def start(path: Path, sentence: str = SENTENCE) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("REPORTFLOW_NOW", None)
    return subprocess.Popen([*CLI, "--config", str(path), "schedules", "draft", sentence,
                             "--write", "--yes"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def big_config(tmp_path: Path) -> Path:
    path = tmp_path / "reportflow.toml"
    # Large enough (a long comment) that writing and syncing the copy takes a while.
    filler = ("# " + "x" * 1022 + "\n") * (12 * 1024)  # 12 MiB: under the 16 MiB a config file may hold
    path.write_text(BASE.format(db=tmp_path / "state.db", provider="builtin", host="x") + filler)
    return path


def test_a_kill_during_the_write_leaves_the_old_file_and_a_finished_write_the_new(
        tmp_path: Path) -> None:
    path = big_config(tmp_path)
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
        proc.communicate(timeout=60)
        assert path.read_bytes() == before
        # what a kill leaves is one temporary file of a fixed name, which the next write replaces
        assert [p.name for p in tmp_path.glob("*.draft")] == [".reportflow.toml.draft"]
    assert killed_mid_write == 3  # every kill landed while the temporary copy existed

    done = start(path)
    _, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    after = path.read_bytes()
    assert after.startswith(before) and after[len(before):].startswith(BLOCK_START)
    assert not list(tmp_path.glob("*.draft")) and not (tmp_path / "state.db").exists()


def blocked_on_flock(pids: set[int]) -> set[int]:
    """The processes among ``pids`` waiting for a flock (``/proc/locks`` marks a waiter ``->``)."""
    waiting = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "->" and fields[2] == "FLOCK" and int(fields[5]) in pids:
            waiting.add(int(fields[5]))
    return waiting


def test_two_writers_at_once_take_turns_and_both_land(tmp_path: Path) -> None:
    path = big_config(tmp_path)
    before = path.read_bytes()
    # The test holds the writers' lock, so both reach it and wait; let go, each appends in turn.
    # Without the lock both would read the same old file and the second rename would drop a block.
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        procs = [start(path, sentence) for sentence in (SENTENCE, "every monday at 09:00 for api")]
        pids = {proc.pid for proc in procs}
        deadline = time.monotonic() + 120
        while blocked_on_flock(pids) != pids and time.monotonic() < deadline \
                and all(proc.poll() is None for proc in procs):
            time.sleep(0.05)
        assert blocked_on_flock(pids) == pids, [proc.poll() for proc in procs]
        assert path.read_bytes() == before
    finally:
        os.close(folder)
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    after = path.read_bytes()
    assert after.startswith(before)
    added = after[len(before):].decode()
    assert added.count("[[schedules]]") == 2
    assert 'name = "api-daily"' in added and 'name = "api-weekly"' in added
    assert not list(tmp_path.glob("*.draft"))
