"""SQLite on a full disk: the database on a small tmpfs that fills while a worker commits.

The database lives on its own 8 MiB tmpfs (skipped, saying why, where mount is
not permitted). A ``work`` process runs ``four_steps`` runs; once some have
finished, a filler file takes every free block while the write-ahead log is
still growing, so the worker's next commit cannot extend it. Then: the error
is clear, ``PRAGMA integrity_check`` is ok, nothing committed is lost; once
the filler is deleted, ``reconcile`` and ``work`` finish everything, and no
step that was SUCCESS runs again (the step log is the witness).
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.acceptance import procs
from tests.reliability.harness import poll, sqlite_runs
from tests.support import utc, write_config

pytestmark = pytest.mark.slow

APPLIED = utc(2026, 6, 1, 0, 3)
SCHEDULE = dict(name="fill", workflow="four_steps", project="p1", cron="*/15 * * * *", timezone="UTC",
                misfire="CATCH_UP_ALL", overlap="ALLOW", catchup_window="7d")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "small"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs for the database: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(folder: Path) -> Path:
    """Take every free block of ``folder``'s filesystem (unbuffered writes until ENOSPC)."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def test_sqlite_disk_fills_while_a_worker_commits(small_fs: Path, tmp_path: Path) -> None:
    db = small_fs / "rf.db"
    log = tmp_path / "steps.log"
    config = write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{db}", schedules=[SCHEDULE],
                          sections={"worker": {"lease": "30s", "poll_interval": "0.2s", "max_attempts": 10},
                                    "testflow": {"log": str(log), "sleep_ms": 5}})
    clock = procs.Shared(APPLIED + timedelta(days=2))  # 192 slots due
    assert procs.run(tmp_path, config, "schedules", "apply", now=APPLIED.strftime("%Y-%m-%dT%H:%M:%SZ")).returncode == 0
    assert procs.run(tmp_path, config, "tick", now=clock.at()).returncode == 0
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the log starts empty: the worker's commits must extend it
    conn.close()
    total = len(sqlite_runs(db))
    assert total >= 190

    worker = procs.spawn(tmp_path, config, "work", "--until-idle", now=clock.at())
    poll(lambda: sum(r.status == "SUCCESS" for r in sqlite_runs(db).values()) >= 5, 120, "five runs to finish")
    filler = _fill(small_fs)
    out, err = procs.finish(worker, timeout=300)
    committed = {k: r for k, r in sqlite_runs(db).items() if r.status == "SUCCESS"}
    success_steps = {(r.id, name) for r in sqlite_runs(db).values() for name, s in r.steps.items() if s == "SUCCESS"}
    # The write failed with a clear error: the process says the disk is full, in one line, and exits 1.
    assert worker.returncode == 1, (worker.returncode, err[-2000:])
    last = [line for line in (out + err).splitlines() if line.strip()][-1]
    assert "database or disk is full" in last, last
    assert len(committed) < total, "the disk filled only after every run had finished"

    check = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        check.close()

    filler.unlink()
    later = clock.at(300)  # past the lease of the run the worker held when it died
    assert procs.run(tmp_path, config, "reconcile", now=later).returncode == 0
    resumed = procs.run(tmp_path, config, "work", "--until-idle", now=later, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = sqlite_runs(db)
    assert all(r.status == "SUCCESS" for r in final.values()), Counter(r.status for r in final.values())
    assert all(final[k].status == "SUCCESS" for k in committed), "a committed run was lost"
    starts: Counter[tuple[int, str]] = Counter()
    for line in log.read_text().splitlines():
        parts = line.split()
        if parts[0] == "start":
            starts[(int(parts[1]), parts[2])] += 1
    again = [key for key in success_steps if starts[key] != 1]
    assert not again, f"SUCCESS steps executed again (or lost): {again[:5]}"
