"""Scheduled, verified backups (``[store] backup``): a copy on each slot, checked, kept ``keep`` deep,
and ``backup_failed`` when a copy does not pass."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from engine.app import cycle
from engine.core import errors
from engine.core.backup_slots import BackupStatus
from engine.execution.pool import WorkerPool
from engine.operations import scheduled_backups
from engine.read import backup_status
from engine.runtime import Runtime
from engine.scheduling import definitions, tick
from engine.store import backup, outbox
from engine.store.tables import backups_taken
from tests.flows.testflows import FOUR_STEPS
from tests.support import ManualRuntime, RuntimeFactory, make_runtime

T0 = datetime(2026, 9, 29, 2, 30, tzinfo=UTC)
SCHEDULE = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
                misfire="CATCH_UP_ALL", overlap="ALLOW")


def _backed_up(runtime: RuntimeFactory, url: str, tmp_path: Path, keep: int = 7) -> ManualRuntime:
    """The hourly ``four`` schedule (not applied) at ``T0`` and a daily 03:00 backup into ``backups``, ``keep`` kept."""
    copies = {"cron": "0 3 * * *", "dir": "backups", "keep": keep}
    return runtime(url, schedules=[SCHEDULE], at=T0, workflows={"four_steps": FOUR_STEPS}, installed=False,
                   base_dir=tmp_path, config={"store": {"backup": copies}, "testflow": {"log": str(tmp_path / "log")}})


def _rows(rt: Runtime) -> list[tuple[datetime, str]]:
    with rt.store.read() as conn:
        return [(r.slot_at, r.status) for r in conn.execute(backups_taken.select().order_by("slot_at"))]


def test_a_backup_is_taken_on_its_slot_verified_and_restorable(sqlite_url: str, tmp_path: Path,
                                                               runtime: RuntimeFactory) -> None:
    rt = _backed_up(runtime, sqlite_url, tmp_path)
    definitions.apply(rt)
    rt.clock.set(T0 + timedelta(minutes=31))  # 03:01: the 03:00 runs and the 03:00 backup are due
    tick.tick(rt)
    outcomes = WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    assert outcomes
    outcome = scheduled_backups.take_due(rt)
    assert outcome is not None and outcome.verified and outcome.slot_at == datetime(2026, 9, 29, 3, 0, tzinfo=UTC)
    assert outcome.path == tmp_path / "backups" / scheduled_backups.file_name(outcome.slot_at)
    # Restorable: a plain sqlite3 open of the file holds the runs the source holds.
    with closing(sqlite3.connect(outcome.path)) as copy, rt.store.read() as conn:
        copied = {(row[0], row[1]) for row in copy.execute("SELECT id, status FROM runs")}
        source = {(row[0], row[1]) for row in conn.exec_driver_sql("SELECT id, status FROM runs")}
    assert copied == source and len(copied) == len(outcomes)
    assert _rows(rt) == [(outcome.slot_at, BackupStatus.VERIFIED)]
    # The same slot again (a second pass in the same minute) takes nothing.
    again = scheduled_backups.take_due(rt)
    assert again is not None and again.slot_at is None
    assert len(list((tmp_path / "backups").iterdir())) == 1


def _flipping(engine: Engine, destination: Path) -> backup.Copy:
    """A copy whose second page's b-tree header is overwritten, as a failing disk would leave it."""
    made = backup.take_copy(engine, destination)
    page_size = int.from_bytes(destination.read_bytes()[16:18], "big")
    with destination.open("r+b") as f:
        f.seek(page_size)  # page 2
        flipped = bytes(b ^ 0xFF for b in f.read(64))
        f.seek(page_size)
        f.write(flipped)
    return made


def test_a_corrupted_copy_fails_verification_raises_backup_failed_and_keeps_the_good_ones(
        sqlite_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = _backed_up(runtime, sqlite_url, tmp_path, keep=2)
    definitions.apply(rt)
    good = scheduled_backups.take_due(rt)  # 02:30: the 2026-09-29 03:00 slot is not come, yesterday's is
    assert good is not None and good.verified and good.path is not None
    rt.clock.set(T0 + timedelta(days=1))
    bad = scheduled_backups.take_due(rt, copy=_flipping)
    assert bad is not None and not bad.verified
    assert any("integrity check" in p or "cannot be read" in p for p in bad.problems), bad.problems
    assert bad.path is not None and not bad.path.exists()  # nobody restores a copy that failed
    assert good.path.exists()  # and the good one stays
    assert [status for _, status in _rows(rt)] == [BackupStatus.VERIFIED, BackupStatus.FAILED]
    with rt.store.read() as conn:
        [event] = outbox.list_events(conn)
    assert event.event == "backup_failed" and event.severity.value == "critical"
    assert event.status.value == "PENDING"  # the sender delivers it
    # doctor: the newest verified backup is the good one, a day old, within two intervals
    [finding] = backup_status.check_backups(rt)
    assert not finding.problem and str(good.path) in finding.message and "is 1d old" in finding.message, finding.message


def test_keep_two_after_three_backups_leaves_two(sqlite_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = _backed_up(runtime, sqlite_url, tmp_path, keep=2)
    taken = []
    for day in range(3):
        rt.clock.set(T0 + timedelta(days=day))
        outcome = scheduled_backups.take_due(rt)
        assert outcome is not None and outcome.verified
        taken.append(outcome.path)
    assert sorted((tmp_path / "backups").iterdir()) == taken[1:]
    assert [status for _, status in _rows(rt)] == [BackupStatus.REMOVED, BackupStatus.VERIFIED, BackupStatus.VERIFIED]


def test_cycle_takes_the_due_backup_and_doctor_shows_its_age(sqlite_url: str, tmp_path: Path,
                                                             runtime: RuntimeFactory) -> None:
    rt = _backed_up(runtime, sqlite_url, tmp_path)
    definitions.apply(rt)
    cycle.cycle(rt, stop=threading.Event())
    assert [status for _, status in _rows(rt)] == [BackupStatus.VERIFIED]
    rt.clock.set(T0 + timedelta(minutes=20))
    [finding] = backup_status.check_backups(rt)
    assert not finding.problem and "is 20m old" in finding.message, finding.message
    rt.clock.set(T0 + timedelta(days=2, hours=1))  # over two days without a backup: older than two intervals
    [finding] = backup_status.check_backups(rt)
    assert finding.problem and "is 49h old, more than 2d" in finding.message, finding.message


@pytest.mark.parametrize("what", ["corrupted", "replaced", "deleted"])
def test_doctor_checks_the_file_it_names_is_still_the_verified_copy(sqlite_url: str, tmp_path: Path, what: str,
                                                                    runtime: RuntimeFactory) -> None:
    """Security round 3, item 8: doctor said "ok" after the newest backup was corrupted, replaced or deleted."""
    rt = _backed_up(runtime, sqlite_url, tmp_path)
    definitions.apply(rt)
    cycle.cycle(rt, stop=threading.Event())
    rt.clock.set(T0 + timedelta(minutes=20))
    [finding] = backup_status.check_backups(rt)
    assert not finding.problem, finding.message
    [copy] = (tmp_path / "backups").glob("*.db")
    if what == "corrupted":  # the same size, one byte changed
        data = bytearray(copy.read_bytes())
        data[len(data) // 2] ^= 0xFF
        copy.write_bytes(bytes(data))
    elif what == "replaced":
        copy.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    else:
        copy.unlink()
    [finding] = backup_status.check_backups(rt)
    says = {"corrupted": "its sha256 differs", "replaced": "bytes, not", "deleted": "it is gone"}[what]
    assert finding.problem and says in finding.message and "not the copy that was checked" in finding.message


def test_doctor_says_when_there_is_no_verified_backup(sqlite_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    rt = _backed_up(runtime, sqlite_url, tmp_path)
    [finding] = backup_status.check_backups(rt)
    assert finding.problem and "no verified backup" in finding.message


@pytest.mark.parametrize("backup_table, problem", [
    ({"cron": "0 3 * *", "dir": "b"}, "store.backup.cron"),
    ({"cron": "0 3 * * *", "dir": "b", "keep": 0}, "store.backup.keep"),
    ({"cron": "0 3 * * *", "dir": "file.txt"}, "store.backup.dir"),
    ({"dir": "b"}, "store.backup.cron"),
    ({"cron": "0 3 * * *", "dir": "b", "timezone": "Mars/Base"}, "store.backup.timezone"),
])
def test_a_bad_backup_table_is_refused_naming_its_key(sqlite_url: str, tmp_path: Path,
                                                      backup_table: dict[str, object], problem: str) -> None:
    (tmp_path / "file.txt").write_text("not a folder")
    with pytest.raises(errors.ConfigInvalid) as caught:
        make_runtime(sqlite_url, base_dir=tmp_path, extra={"store": {"backup": backup_table}})
    assert caught.value.key == problem


@pytest.mark.parametrize("folder, says", [
    ("/etc/reportflow-backups", "a system folder"), ("../../../etc", "outside the config's folder"),
    ("to-etc/backups", "outside the config's folder"), ("/", "the filesystem root"),
])
def test_a_backup_folder_gets_the_checks_the_reports_folder_gets(sqlite_url: str, tmp_path: Path, folder: str,
                                                                  says: str) -> None:
    """Security round 3, item 7: a database copy was written into /etc."""
    (tmp_path / "to-etc").symlink_to("/etc")
    with pytest.raises(errors.ConfigInvalid) as caught:
        make_runtime(sqlite_url, base_dir=tmp_path, extra={"store": {"backup": {"cron": "0 3 * * *", "dir": folder}}})
    assert caught.value.key == "store.backup.dir" and says in caught.value.message
