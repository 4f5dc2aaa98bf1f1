"""A running serve follows its config file: new settings are taken, a broken file is an alert and changes nothing."""

from __future__ import annotations

from pathlib import Path

from engine.app import config_reload
from engine.plugins import workflow_registry
from engine.runtime import Runtime
from engine.store import outbox
from engine.store.handle import Store
from tests.support import config_mod_now, write_config

SCHEDULE = dict(name="daily", workflow="daily_report", project="app", cron="30 19 * * *", timezone="UTC")


def runtime(path: Path) -> Runtime:
    from engine.core.clock import ManualClock

    config, registry = workflow_registry.load_with_config(path)
    return Runtime(store=Store.open(config.store_url), registry=registry, config=config,
                   clock=ManualClock(config_mod_now()))


def write(path: Path, db: str, language: str, cron: str = "30 19 * * *") -> None:
    write_config(path, db_url=db, sections={"reports": {"language": language}},
                 projects=[{"key": "app", "repo": str(path.parent)}], schedules=[dict(SCHEDULE, cron=cron)])


def test_serve_takes_a_changed_config_and_alerts_on_a_broken_one(tmp_path: Path) -> None:
    path, db = tmp_path / "reportflow.toml", f"sqlite:///{tmp_path / 'rf.db'}"
    write(path, db, "en")
    rt = runtime(path)
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
