"""The nothing-due ``tick`` fast path, piece by piece: which command lines it takes, what its fingerprint covers.

The end-to-end behaviour (the full path's output and errors, through the real
CLI) is in tests/integration/test_fast_tick.py.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy

from engine.cli import fast_tick
from engine.config import config_file, defaults
from engine.store import due, fingerprints, tables

ENV_NONE: dict[str, str] = {}


@pytest.mark.parametrize(("argv", "env", "expected"), [
    (["tick"], ENV_NONE, ("reportflow.toml", None, None, False)),
    (["tick", "--json"], ENV_NONE, ("reportflow.toml", None, None, True)),
    (["--config", "a.toml", "--now", "2026-03-02T10:00:30Z", "--db", "sqlite:///x.db", "--log-format", "json", "tick"],
     ENV_NONE, ("a.toml", "2026-03-02T10:00:30Z", "sqlite:///x.db", False)),
    (["--config=a.toml", "--now=2026-03-02T10:00:30Z@1700000000", "--db=sqlite:///x.db", "tick", "--json"],
     ENV_NONE, ("a.toml", "2026-03-02T10:00:30Z@1700000000", "sqlite:///x.db", True)),
    (["tick"], {"REPORTFLOW_CONFIG": "e.toml", "REPORTFLOW_NOW": "2026-01-01T00:00:00Z", "REPORTFLOW_DB": "sqlite:///e.db"},
     ("e.toml", "2026-01-01T00:00:00Z", "sqlite:///e.db", False)),
    # An option beats its variable; an empty variable is an unset one (as Click reads it).
    (["--config", "a.toml", "tick"], {"REPORTFLOW_CONFIG": "e.toml", "REPORTFLOW_DB": ""}, ("a.toml", None, None, False)),
    (["--config", "tick", "tick"], ENV_NONE, ("tick", None, None, False)),  # a config file named tick
])
def test_the_command_lines_it_takes(argv: list[str], env: dict[str, str],
                                    expected: tuple[str, str | None, str | None, bool]) -> None:
    request = fast_tick.parse_argv(argv, env)
    assert request is not None
    assert (str(request.config_path), request.now_spec, request.db_override, request.as_json) == expected


@pytest.mark.parametrize("argv", [
    [], ["--version"], ["tick", "--help"], ["tick", "--json", "--json"], ["tick", "extra"], ["work"],
    ["schedules", "tick"], ["--config"], ["--config", "tick"], ["--config=", "tick"], ["--config", "-x", "tick"],
    ["--config", "a.toml", "--config", "b.toml", "tick"], ["--log-format", "yaml", "tick"],
    ["--log-format=xml", "tick"], ["--verbose", "tick"], ["-c", "a.toml", "tick"], ["--", "tick"],
    ["--version", "tick"], ["--help", "tick"], ["--json", "tick"],
])
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert fast_tick.parse_argv(argv, ENV_NONE) is None


@pytest.mark.parametrize(("toml", "argv", "env"), [
    ("", ["tick"], ENV_NONE),  # the default database, beside the config
    ('[store]\nurl = "sqlite:///state/rf.db"\n', ["tick"], ENV_NONE),  # relative to the config's folder
    ('[store]\nurl = "sqlite:////var/rf.db"\n', ["tick"], ENV_NONE),
    ('[store]\nurl = "postgresql://u@h/db"\n', ["tick"], ENV_NONE),
    ('[store]\nurl = "sqlite:///rf.db"\n', ["--db", "sqlite:///over.db", "tick"], ENV_NONE),
    ('[store]\nurl = "sqlite:///rf.db"\n', ["tick"], {"REPORTFLOW_DB": "sqlite:///env.db"}),
])
def test_the_store_url_resolves_in_one_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str,
                                             argv: list[str], env: dict[str, str]) -> None:
    """The fast path opens the database the full path would: same URL for every way of naming it."""
    path = tmp_path / "site" / "reportflow.toml"
    path.parent.mkdir()
    path.write_text(toml)
    monkeypatch.chdir(tmp_path)  # the config is not in the working directory
    monkeypatch.delenv("REPORTFLOW_DB", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    request = fast_tick.parse_argv(["--config", str(path), *argv], env)
    assert request is not None
    full = config_file.load_config(path, {}, db_override=request.db_override).store_url
    assert fast_tick._store_url(path.read_bytes(), request) == full
    assert full != defaults.DEFAULT_DB_URL  # resolved against the config's folder, never the working directory


def test_the_bare_table_clauses_match_the_tables() -> None:
    """The fast path reads through bare clauses; they must name what the migrations build."""
    def shape(table: sqlalchemy.TableClause, names: list[str]) -> list[tuple[str, str, str]]:
        return [(table.name, name, repr(table.c[name].type)) for name in names]

    light = fingerprints.CONFIG_FINGERPRINTS
    assert shape(light, list(light.c.keys())) == shape(tables.config_fingerprints, list(light.c.keys()))
    assert shape(due.NEXT_RUN_AT.table, ["next_run_at"]) == shape(tables.schedules, ["next_run_at"])
    index = next(i for i in tables.schedules.indexes if i.name == "ix_schedules_due")
    assert str(index.dialect_options["sqlite"]["where"]) == due.LIVE_SCHEDULE


def test_the_fingerprint_follows_the_config_its_place_and_the_store_override(tmp_path: Path) -> None:
    path = tmp_path / "reportflow.toml"
    path.write_text('[store]\nurl = "sqlite:///rf.db"\n')
    first = fast_tick.read_inputs(path, None)
    assert fast_tick.read_inputs(path, None).fingerprint == first.fingerprint
    assert first.config_bytes == path.read_bytes()

    assert fast_tick.read_inputs(path, "sqlite:///other.db").fingerprint != first.fingerprint
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "reportflow.toml").write_bytes(path.read_bytes())
    assert fast_tick.read_inputs(tmp_path / "b" / "reportflow.toml", None).fingerprint != first.fingerprint
    path.write_text('[store]\nurl = "sqlite:///rf.db"\n\n')
    assert fast_tick.read_inputs(path, None).fingerprint != first.fingerprint


def test_the_fingerprint_follows_the_distributions_on_sys_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    path = tmp_path / "reportflow.toml"
    path.write_text("")
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    before = fast_tick.read_inputs(path, None).fingerprint

    (site / "rf.db").write_text("x")  # other files come and go (a database beside the config): no change
    assert fast_tick.read_inputs(path, None).fingerprint == before

    info = site / "extra_flows-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text("[reportflow.workflows]\nx = extra:X\n")
    installed = fast_tick.read_inputs(path, None).fingerprint
    assert installed != before

    (info / "entry_points.txt").write_text("[reportflow.workflows]\nxy = extra:XY\n")  # edited in place
    assert fast_tick.read_inputs(path, None).fingerprint not in (before, installed)

    (info / "entry_points.txt").unlink()
    info.rmdir()
    assert fast_tick.read_inputs(path, None).fingerprint == before


def test_a_reinstall_of_the_same_version_changes_the_fingerprint(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """pip removes and writes a distribution's ``*.dist-info`` anew on every install, even of the same
    version (an editable install whose entry points changed, say): the folder's stamp counts."""
    site = tmp_path / "site"
    info = site / "flows-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Name: flows\nVersion: 1.0\n")
    path = tmp_path / "reportflow.toml"
    path.write_text("")
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    before = fast_tick.read_inputs(path, None).fingerprint

    stat = info.stat()
    os.utime(info, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # written again a second later
    assert fast_tick.read_inputs(path, None).fingerprint != before


def test_watched_files_are_the_sources_loaded_from_outside_the_installation(tmp_path: Path) -> None:
    extra = tmp_path / "flow.py"
    extra.write_text("X = 1\n")
    files = {path: (size, mtime) for path, size, mtime in fast_tick.watched_files([extra]) or []}

    assert os.path.abspath(fast_tick.__file__) in files  # the engine, from this checkout
    assert str(extra) in files and files[str(extra)][0] == 6
    assert os.path.abspath(json.__file__) not in files  # the stdlib: pip and the interpreter stamp change it
    assert os.path.abspath(sqlalchemy.__file__) not in files  # site-packages: covered by the dist-info stamps


def test_unchanged_compares_size_and_mtime(tmp_path: Path) -> None:
    flow = tmp_path / "flow.py"
    flow.write_text("X = 1\n")
    recorded = json.dumps(fast_tick.watched_files([flow]))
    assert fast_tick.unchanged(recorded)

    stat = flow.stat()
    os.utime(flow, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # touched, same bytes
    assert not fast_tick.unchanged(recorded)
    os.utime(flow, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fast_tick.unchanged(recorded)

    flow.unlink()
    with pytest.raises(OSError):
        fast_tick.unchanged(recorded)


def test_an_idle_cycle_is_one_with_no_due_schedule_and_no_run_to_reconcile_or_claim() -> None:
    now = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    live = ("RUNNING", now + timedelta(seconds=20), now - timedelta(minutes=5), 3600)
    assert not fast_tick.cycle_has_work(now, now + timedelta(hours=1), [])
    assert not fast_tick.cycle_has_work(now, None, [live])  # another process executing within its lease
    assert fast_tick.cycle_has_work(now, now - timedelta(hours=2), [])  # due, or silent past its grace
    assert fast_tick.cycle_has_work(now, None, [("QUEUED", None, None, 3600)])
    assert fast_tick.cycle_has_work(now, None, [("PENDING", None, None, 3600)])
    assert fast_tick.cycle_has_work(now, None, [("RUNNING", now - timedelta(seconds=1), now, 3600)])  # expired
    assert fast_tick.cycle_has_work(now, None, [("RUNNING", live[1], now - timedelta(hours=2), 3600)])  # stalled


@pytest.mark.parametrize("argv, command, as_json", [(["cycle"], "cycle", False), (["--db", "x", "cycle", "--json"],
                                                                                 "cycle", True)])
def test_cycle_is_parsed_like_tick(argv: list[str], command: str, as_json: bool) -> None:
    request = fast_tick.parse_argv(argv, ENV_NONE)
    assert request is not None and request.command == command and request.as_json is as_json
    assert fast_tick.parse_argv(["cycle", "--worker-id", "a"], ENV_NONE) is None  # the full path's option
