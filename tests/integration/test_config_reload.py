"""A running serve follows its config file: new settings are taken, a broken file is an alert and changes nothing."""

from __future__ import annotations

from pathlib import Path

from engine.app import config_reload
from engine.store import outbox
from tests.support import RuntimeFactory, write_config

SCHEDULE = dict(name="daily", workflow="daily_report", project="app", cron="30 19 * * *", timezone="UTC")


def write(path: Path, db: str, language: str, cron: str = "30 19 * * *") -> None:
    write_config(path, db_url=db, sections={"reports": {"language": language}},
                 projects=[{"key": "app", "repo": str(path.parent)}], schedules=[dict(SCHEDULE, cron=cron)])


def test_serve_takes_a_changed_config_and_alerts_on_a_broken_one(tmp_path: Path, runtime: RuntimeFactory) -> None:
    path, db = tmp_path / "reportflow.toml", f"sqlite:///{tmp_path / 'rf.db'}"
    write(path, db, "en")
    rt = runtime.from_file(path)
    seen = config_reload.watch(rt)
    assert seen is not None and config_reload.reload_if_changed(rt, seen) is None  # nothing changed
    write(path, db, "ko")
    assert config_reload.reload_if_changed(rt, seen) == "reloaded"
    assert rt.settings("daily_report").reports.language == "ko"  # the runs made from now on are Korean
    path.write_text(path.read_text() + "\n[reports\n")  # an editor saved half a line
    assert config_reload.reload_if_changed(rt, seen) == "invalid"
    assert rt.settings("daily_report").reports.language == "ko"  # the last good configuration stays
    assert config_reload.reload_if_changed(rt, seen) is None  # raised once for that content
    write(path, db, "ko", cron="61 19 * * *")  # one bad schedule: left out, said in an alert
    assert config_reload.reload_if_changed(rt, seen) == "reloaded"
    with rt.store.read() as conn:
        raised = [e for e in outbox.list_events(conn) if e.event == "config_invalid"]
    assert len(raised) == 2 and any("keeps the configuration it had" in e.summary for e in raised)
    assert any("schedule 'daily' is left out" in e.summary for e in raised)


def test_a_config_swapped_for_a_device_a_fifo_or_a_huge_file_is_refused_before_it_is_read(
        tmp_path: Path, runtime: RuntimeFactory) -> None:
    """Security round 3, item 3: the reload read the file first (``/dev/zero``: MemoryError and exit; a FIFO: the
    loop hung past SIGTERM; 1.5 GB: 1.6 GB of memory). Now each is refused as the first load refuses it, the last
    good configuration stays, and one ``config_invalid`` says why."""
    import os
    import resource

    good, db = tmp_path / "good.toml", f"sqlite:///{tmp_path / 'rf.db'}"
    write(good, db, "ko")
    link = tmp_path / "reportflow.toml"
    link.symlink_to(good)
    rt = runtime.from_file(link)
    seen = config_reload.watch(rt)
    assert seen is not None
    fifo, huge = tmp_path / "fifo", tmp_path / "huge.toml"
    os.mkfifo(fifo)
    with open(huge, "wb") as f:
        f.truncate(1536 * 1024 * 1024)  # sparse: 1.5 GB to whoever reads it
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for target in (Path("/dev/zero"), fifo, huge):
        link.unlink()
        link.symlink_to(target)
        assert config_reload.reload_if_changed(rt, seen) == "invalid", target
        assert rt.settings("daily_report").reports.language == "ko"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB: nothing was read
    with rt.store.read() as conn:
        said = [e.summary for e in outbox.list_events(conn) if e.event == "config_invalid"]
    assert len(said) == 2 and all("keeps the configuration it had" in s for s in said)  # one per problem
    assert any("not a regular file" in s for s in said) and any("at most" in s for s in said)
    link.unlink()
    link.symlink_to(good)
    write(good, db, "en")
    assert config_reload.reload_if_changed(rt, seen) == "reloaded"
    assert rt.settings("daily_report").reports.language == "en"
