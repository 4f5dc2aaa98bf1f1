"""Holidays and maintenance through the real CLI (SPEC §18): pause and resume audited and shown, every refusal
exits 2 and writes nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.support import run_cli, write_config

NOW = "2026-10-01T12:00:00Z"
DAILY = dict(name="cd", workflow="echo", project="p", cron="0 9 * * *", timezone="Asia/Seoul", calendar="KR",
             holidays=["2026-10-07"])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pause_and_resume_are_audited_and_shown(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", schedules=[DAILY])
    assert run_cli("schedules", "apply", config=config, now=NOW).returncode == 0
    paused = run_cli("schedules", "pause", "cd", "--until", "2026-10-03T00:00:00+09:00", "--reason", "repo move",
                     config=config, now=NOW)
    assert paused.returncode == 0, paused.stderr
    assert "paused until 2026-10-02T15:00:00Z" in paused.stdout
    shown = json.loads(run_cli("schedules", "show", "cd", "--json", config=config, now=NOW).stdout)
    assert (shown["calendar"], shown["holidays"]) == ("KR", ["2026-10-07"])
    assert shown["maintenance"] == [{"start": NOW, "end": "2026-10-02T15:00:00Z", "reason": "repo move",
                                     "schedules": ["cd"], "paused": True}]
    listed = run_cli("schedules", "list", config=config, now=NOW, env={"COLUMNS": "250"})
    assert "paused until" in listed.stdout and "2026-10-02T15:00:00Z" in listed.stdout  # the cell may wrap
    resumed = run_cli("schedules", "resume", "cd", "--reason", "moved", config=config, now="2026-10-01T13:00:00Z")
    assert resumed.returncode == 0 and "schedule cd resumed" in resumed.stdout
    history = json.loads(run_cli("schedules", "history", "cd", "--json", config=config, now=NOW).stdout)
    assert [(e["action"], e["reason"]) for e in history if e["action"] in ("pause", "resume")] == [
        ("pause", "repo move"), ("resume", "moved")]


@pytest.mark.parametrize("args", [
    ["--until", "2026-10-01T11:00:00Z", "--reason", "x"],  # in the past
    ["--until", "2026-10-02T11:00:00", "--reason", "x"],  # no offset
    ["--until", "2026-10-02T11:00:00Z"],  # no reason
])
def test_a_bad_pause_exits_2_and_writes_nothing(tmp_path: Path, args: list[str]) -> None:
    config = write_config(tmp_path / "reportflow.toml", schedules=[DAILY])
    assert run_cli("schedules", "apply", config=config, now=NOW).returncode == 0
    db = tmp_path / ".reportflow" / "reportflow.db"
    before = _digest(db)
    refused = run_cli("schedules", "pause", "cd", *args, config=config, now=NOW)
    assert refused.returncode == 2, refused.stderr
    assert _digest(db) == before


@pytest.mark.parametrize(("entry", "key", "words"), [
    ({"calendar": "XX"}, "schedules[0].calendar", "unknown country 'XX'"),
    ({"calendar": "US-ZZ"}, "schedules[0].calendar", "country US has no subdivision 'ZZ'"),
    ({"holidays": ["2026-02-30"]}, "schedules[0].holidays", ""),
])
def test_an_unknown_calendar_exits_2_naming_the_key_and_writes_nothing(tmp_path: Path, entry: dict[str, object],
                                                                       key: str, words: str) -> None:
    config = write_config(tmp_path / "reportflow.toml", schedules=[{**DAILY, **entry}])
    refused = run_cli("schedules", "apply", config=config, now=NOW)
    assert refused.returncode == 2, refused.stderr
    assert key in refused.stderr and words in refused.stderr
    assert not (tmp_path / ".reportflow" / "reportflow.db").exists()


def test_a_maintenance_window_without_a_timezone_or_for_an_unknown_schedule_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", schedules=[DAILY])
    for window, key in (('start = 2026-10-10T01:00:00\nend = 2026-10-10T03:00:00+09:00', "maintenance[0].start"),
                        ('start = 2026-10-10T01:00:00Z\nend = 2026-10-10T03:00:00Z\nschedules = ["nope"]',
                         "maintenance[0].schedules"),
                        ('start = 2026-10-10T03:00:00Z\nend = 2026-10-10T01:00:00Z', "maintenance[0].end")):
        config.write_text(config.read_text().split("[[maintenance]]")[0]
                          + f'[[maintenance]]\n{window}\nreason = "upgrade"\n', encoding="utf-8")
        refused = run_cli("schedules", "apply", config=config, now=NOW)
        assert refused.returncode == 2 and key in refused.stderr, (window, refused.stderr)
        assert not (tmp_path / ".reportflow" / "reportflow.db").exists()


def test_preview_and_show_say_what_decides_a_run(tmp_path: Path) -> None:
    """Issue 43, item 5: the preview listed holiday, maintenance and paused slots as normal fire times, and
    ``schedules show`` left out ``after``, ``start_by``, ``on_upstream`` and ``auto_recover``."""
    other = dict(name="up", workflow="echo", project="q", cron="0 8 * * *", timezone="Asia/Seoul")
    config = write_config(tmp_path / "reportflow.toml",
                          schedules=[other, {**DAILY, "after": ["up"], "start_by": "2h", "on_upstream": "skip",
                                             "auto_recover": 2}])
    assert run_cli("schedules", "apply", config=config, now=NOW).returncode == 0
    assert run_cli("schedules", "pause", "cd", "--until", "2026-10-03T00:00:00+09:00", "--reason", "repo move",
                   config=config, now=NOW).returncode == 0
    fires = json.loads(run_cli("schedules", "preview", "cd", "-n", "8", "--json", config=config, now=NOW).stdout)
    by_day = {f["local"][:10]: f["skipped"] for f in fires}
    assert by_day["2026-10-02"] == "maintenance"  # the pause
    assert by_day["2026-10-03"] == "holiday" and by_day["2026-10-07"] == "holiday"  # KR's, and one of its own
    assert by_day["2026-10-06"] is None  # an ordinary day runs
    table = run_cli("schedules", "preview", "cd", "-n", "8", config=config, now=NOW, env={"COLUMNS": "120"}).stdout
    assert "skipped: holiday" in table and "skipped: maintenance" in table
    shown = json.loads(run_cli("schedules", "show", "cd", "--json", config=config, now=NOW).stdout)
    assert (shown["after"], shown["start_by"], shown["on_upstream"], shown["auto_recover"]) == (
        ["up"], "2h", "skip", 2)


def test_an_edit_shows_its_next_fire_times_before_it_is_applied(tmp_path: Path) -> None:
    """Issue 43, item 5: ``schedules set --dry-run`` and ``apply --dry-run`` show the next fire times before and
    after, and write nothing."""
    config = write_config(tmp_path / "reportflow.toml", schedules=[DAILY])
    assert run_cli("schedules", "apply", config=config, now=NOW).returncode == 0
    dry = run_cli("schedules", "set", "cd", "--cron", "30 18 * * *", "--expect-version", "1", "--dry-run",
                  config=config, now=NOW)
    assert dry.returncode == 0, dry.stderr
    assert "dry run, nothing written" in dry.stdout and "09:00 KST" in dry.stdout and "18:30 KST" in dry.stdout
    shown = json.loads(run_cli("schedules", "show", "cd", "--json", config=config, now=NOW).stdout)
    assert (shown["cron"], shown["version"]) == ("0 9 * * *", 1)
    write_config(tmp_path / "reportflow.toml", schedules=[{**DAILY, "cron": "0 7 * * 1-5"}])
    plan = run_cli("schedules", "apply", "--dry-run", config=config, now=NOW)
    assert plan.returncode == 0 and "cd next fire times" in plan.stdout and "07:00 KST" in plan.stdout
    assert json.loads(run_cli("schedules", "show", "cd", "--json", config=config, now=NOW).stdout)["cron"] == \
        "0 9 * * *"
