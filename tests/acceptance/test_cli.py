"""The CLI as a user runs it: validation, preview, bad input, exit codes."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.support import run_cli, write_config

SCHEDULE = dict(name="platform-daily", workflow="daily_report", project="platform", cron="30 19 * * *",
                timezone="Asia/Seoul", report_on="current")
PROJECT = dict(key="platform", repo=".")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_validate_names_the_bad_minute_field() -> None:
    result = run_cli("schedules", "validate", "--cron", "61 * * * *", "--timezone", "Asia/Seoul")
    assert result.returncode == 2
    assert "minute" in result.stderr and "0-59" in result.stderr


def test_validate_refuses_an_unknown_timezone() -> None:
    result = run_cli("schedules", "validate", "--cron", "0 9 * * *", "--timezone", "Mars/Olympus")
    assert result.returncode == 2
    assert "Mars/Olympus" in result.stderr


def test_validate_summary_for_a_good_cron() -> None:
    result = run_cli("schedules", "validate", "--cron", "30 19 * * *", "--timezone", "Asia/Seoul",
                     "--workflow", "daily_report", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["valid"] and data["runs_per_day"] == 1 and len(data["next_fires"]) == 5
    assert all(f["utc"].endswith("Z") for f in data["next_fires"])


def test_hourly_cron_on_a_daily_workflow_is_invalid() -> None:
    result = run_cli("schedules", "validate", "--cron", "0 * * * *", "--timezone", "UTC", "--workflow",
                     "daily_report")
    assert result.returncode == 2
    assert "fires 24 times" in result.stderr and "a daily workflow allows one slot per day" in result.stderr
    assert "invalid" in result.stdout
    # The workflow is the reason: the same cron is valid for one without a daily period.
    anything = run_cli("schedules", "validate", "--cron", "0 * * * *", "--timezone", "UTC", "--workflow", "echo")
    assert anything.returncode == 0, anything.stderr


def test_preview_new_york_dst_days(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", projects=[PROJECT], schedules=[
        dict(SCHEDULE, name="ny", cron="30 2 * * *", timezone="America/New_York", report_on="previous")])
    assert run_cli("schedules", "apply", config=config, now="2026-03-01T00:00:00Z").returncode == 0
    result = run_cli("schedules", "preview", "ny", "-n", "14", "--json", config=config, now="2026-03-01T00:00:00Z")
    assert result.returncode == 0, result.stderr
    fires = json.loads(result.stdout)
    on_the_8th = [f for f in fires if f["local"].startswith("2026-03-08")]
    assert len(on_the_8th) == 1 and on_the_8th[0]["local"].startswith("2026-03-08T03:00") and on_the_8th[0]["moved"]
    result = run_cli("schedules", "preview", "ny", "-n", "5", "--json", config=config, now="2026-10-30T12:00:00Z")
    fires = json.loads(result.stdout)
    assert len([f for f in fires if f["local"].startswith("2026-11-01")]) == 1


def test_bad_config_on_a_fresh_install_writes_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", projects=[PROJECT],
                          schedules=[dict(SCHEDULE, cron="61 * * * *")])
    result = run_cli("schedules", "apply", config=config)
    assert result.returncode == 2
    assert "schedules[0].cron" in result.stderr and "minute" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reportflow.toml"]  # no database, no reports/


BAD_CONFIGS = {
    "toml syntax": "[[schedules]\nname = 1",
    "unknown key": '[worker]\nleese = "60s"\n',
    "bad duration": '[worker]\nlease = "sixty"\n',
    "negative attempts": "[worker]\nmax_attempts = 0\n",
    "unknown provider": '[llm]\nprovider = "gpt"\n',
    "traversal project key": '[[projects]]\nkey = "../x"\nrepo = "."\n',
    "upper-case project key": '[[projects]]\nkey = "Platform"\nrepo = "."\n',
    "bad on_existing": '[reports]\non_existing = "append"\n',
    "notion enabled without target": "[notion]\nenabled = true\n",
    "token_env not a name": '[notion]\ntoken_env = "secret value"\n',
    "unsupported language": '[reports]\nlanguage = "fr"\n',
    "prompt v1 for a Korean report": '[reports]\nlanguage = "ko"\n[llm]\nprovider = "ollama"\nprompt_version = "v1"\n',
}


def test_an_unsupported_language_names_the_key_and_the_supported_values(tmp_path: Path) -> None:
    config = tmp_path / "reportflow.toml"
    config.write_text('[reports]\nlanguage = "fr-FR"\n')
    result = run_cli("schedules", "apply", config=config)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "reports.language" in line and "'fr-FR'" in line and "supported values: en, ko" in line


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config whose schedule is applied: one database for the read-only bad-input cases of this module.

    Each case still checks the database's bytes before and after its own command.
    """
    folder = tmp_path_factory.mktemp("applied")
    config = write_config(folder / "reportflow.toml", projects=[PROJECT], schedules=[
        SCHEDULE, dict(name="e", workflow="echo", project="p", cron="0 9 * * *", timezone="UTC")])
    result = run_cli("schedules", "apply", config=config)
    assert result.returncode == 0, result.stderr
    return config


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_malformed_configs_exit_2_and_leave_the_database_alone(applied: Path, tmp_path: Path, case: str) -> None:
    db = applied.parent / ".reportflow" / "reportflow.db"
    before = digest(db)
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD_CONFIGS[case])
    result = run_cli("--db", f"sqlite:///{db}", "schedules", "apply", config=bad)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "bad.toml" in result.stderr
    assert digest(db) == before
    assert not (tmp_path / "reports").exists() and not (applied.parent / "reports").exists()


def test_stale_version_exits_3_and_changes_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", projects=[PROJECT], schedules=[SCHEDULE])
    assert run_cli("schedules", "apply", config=config).returncode == 0
    ok = run_cli("schedules", "set", "platform-daily", "--cron", "0 20 * * *", "--expect-version", "1",
                 config=config)
    assert ok.returncode == 0, ok.stderr
    stale = run_cli("schedules", "set", "platform-daily", "--cron", "0 21 * * *", "--expect-version", "1",
                    config=config)
    assert stale.returncode == 3
    shown = json.loads(run_cli("schedules", "show", "platform-daily", "--json", config=config).stdout)
    assert shown["cron"] == "0 20 * * *" and shown["version"] == 2
    history = json.loads(run_cli("schedules", "history", "platform-daily", "--json", config=config).stdout)
    assert [e["action"] for e in history] == ["create", "set"]
    assert history[1]["before"]["cron"] == "30 19 * * *" and history[1]["after"]["cron"] == "0 20 * * *"


def test_a_tenfold_rise_in_runs_per_day_needs_yes(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", schedules=[
        dict(name="e", workflow="echo", project="p", cron="0 9 * * *", timezone="UTC")])
    assert run_cli("schedules", "apply", config=config).returncode == 0
    refused = run_cli("schedules", "set", "e", "--cron", "*/15 * * * *", "--expect-version", "1", config=config)
    assert refused.returncode == 2 and "high risk" in refused.stderr
    accepted = run_cli("schedules", "set", "e", "--cron", "*/15 * * * *", "--expect-version", "1", "--yes",
                       config=config)
    assert accepted.returncode == 0, accepted.stderr


def test_apply_is_idempotent_and_archives_removed_schedules(tmp_path: Path) -> None:
    two = [dict(name="a", workflow="echo", project="p1", cron="0 9 * * *", timezone="UTC"),
           dict(name="b", workflow="echo", project="p2", cron="0 9 * * *", timezone="UTC")]
    config = write_config(tmp_path / "reportflow.toml", schedules=two)
    assert run_cli("schedules", "apply", config=config).returncode == 0
    again = run_cli("schedules", "apply", config=config)
    assert "unchanged: a, b" in again.stdout
    write_config(tmp_path / "reportflow.toml", schedules=two[:1])
    assert "archived: b" in run_cli("schedules", "apply", config=config).stdout
    listed = json.loads(run_cli("schedules", "list", "--json", config=config).stdout)
    assert [s["name"] for s in listed] == ["a"]
    everything = json.loads(run_cli("schedules", "list", "--archived", "--json", config=config).stdout)
    assert {s["name"]: s["archived"] for s in everything} == {"a": False, "b": True}


@pytest.mark.parametrize(("args", "code"), [
    (["runs", "show", "abc"], 2), (["runs", "show", "999"], 2), (["runs", "retry", "-1"], 2),
    (["trigger", "nope"], 2), (["trigger", "e", "--date", "2026-13-01"], 2),
    (["backfill", "e", "--from", "2026-09-30", "--to", "2026-09-01"], 2),
    (["backfill", "e", "--from", "yesterday", "--to", "2026-09-01"], 2),
    (["runs", "list", "--status", "DONE"], 2), (["--now", "tomorrow", "tick"], 2),
    (["--log-format", "xml", "tick"], 2),
])
def test_bad_arguments_exit_2(applied: Path, args: list[str], code: int) -> None:
    db = applied.parent / ".reportflow" / "reportflow.db"
    before = digest(db)
    result = run_cli(*args, config=applied)
    assert result.returncode == code, result.stdout + result.stderr
    assert result.stderr.strip()
    assert digest(db) == before


def test_help_has_examples() -> None:
    result = run_cli("--help")
    assert result.returncode == 0 and "Example" in result.stdout
    for sub in (["schedules", "set"], ["runs", "retry"], ["backfill"], ["work"], ["serve"], ["doctor"]):
        shown = run_cli(*sub, "--help")
        assert shown.returncode == 0 and "Example" in shown.stdout, sub


def test_json_logs_keep_fields_and_every_printed_instant_is_whole_seconds_z(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}", schedules=[
        dict(name="quiet", workflow="echo", project="p1", cron="0 * * * *", timezone="UTC")])
    assert run_cli("schedules", "apply", config=config, now="2026-09-29T09:00:00Z").returncode == 0
    # No tick ran: at 11:00 the 10:00 slot is past its grace and the reconciler reports a silent schedule.
    result = run_cli("--log-format", "json", "reconcile", config=config, now="2026-09-29T11:00:00.250000Z")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    silent = [line for line in lines if line["event"] == "schedule_silent"]
    assert len(silent) == 1 and silent[0]["schedule"] == "quiet"
    assert silent[0]["next_run_at"] == "2026-09-29T10:00:00Z"
    text = run_cli("reconcile", config=config, now="2026-09-29T11:00:00.250000Z")
    assert "schedule_silent schedule=quiet next_run_at=2026-09-29T10:00:00Z" in text.stderr
    tick = run_cli("tick", config=config, now="2026-09-29T11:00:00.250000Z")
    assert tick.returncode == 0, tick.stderr
    assert re.search(r"tick at 2026-09-29T11:00:\d\dZ: ", tick.stdout), tick.stdout
    listed = json.loads(run_cli("runs", "list", "--json", config=config, now="2026-09-29T11:00:01.5Z").stdout)
    instants = [v for run in listed for k, v in run.items() if k.endswith("_at") or k in ("scheduled_for",)]
    assert instants and all(v is None or re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", v) for v in instants)
    assert any(v is not None and v.startswith("2026-09-29T11:00:") for v in instants)  # created_at, at whole seconds


def test_apply_refuses_drift_from_schedules_set_then_dry_run_and_overwrite(tmp_path: Path) -> None:
    specs = [dict(name="cd", workflow="echo", project="p", cron="30 19 * * *", timezone="UTC")]
    config = write_config(tmp_path / "reportflow.toml", schedules=specs)
    assert run_cli("schedules", "apply", config=config).returncode == 0
    assert run_cli("schedules", "set", "cd", "--cron", "0 20 * * *", "--expect-version", "1",
                   config=config).returncode == 0
    db = tmp_path / ".reportflow" / "reportflow.db"
    before = digest(db)
    refused = run_cli("schedules", "apply", config=config)
    assert refused.returncode == 3
    assert "cron: database '0 20 * * *', file '30 19 * * *'" in refused.stderr
    assert digest(db) == before
    planned = run_cli("schedules", "apply", "--dry-run", config=config)
    assert planned.returncode == 0 and "drifted: cd" in planned.stdout
    assert "cd cron: database '0 20 * * *', file '30 19 * * *'" in planned.stdout
    assert digest(db) == before
    won = run_cli("schedules", "apply", "--overwrite", config=config)
    assert won.returncode == 0 and "updated: cd" in won.stdout and "drift overwritten on cd" in won.stderr
    shown = json.loads(run_cli("schedules", "show", "cd", "--json", config=config).stdout)
    assert shown["cron"] == "30 19 * * *"
    history = json.loads(run_cli("schedules", "history", "cd", "--json", config=config).stdout)
    assert [e["action"] for e in history] == ["create", "set", "drift_overwritten", "update"]


def test_help_shows_brackets_as_written() -> None:
    """Rich reads help text as markup: ``[[schedules]]`` printed as ``[]`` until escaped."""
    for args, written in ((["schedules", "apply"], "Sync [[schedules]] from the config"),
                          (["workflows"], "configured ([[workflows]])"),
                          (["ui"], "unless the [ui] token_env variable"), (["serve"], "on [ui] host")):
        shown = run_cli(*args, "--help", env={"COLUMNS": "200"})
        assert shown.returncode == 0 and written in shown.stdout, (args, shown.stdout)
        assert "[]" not in shown.stdout
