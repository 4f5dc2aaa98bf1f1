"""A nothing-due ``tick`` answered by the fast path (engine.cli.fast_tick), against real databases.

The fast path may answer only what the full path would have answered: the
same bytes on stdout, exit 0. Whenever an input the full path validates
changed (the config, a ``[[workflows]]`` file, an installed distribution), or
something is due, or the schema is not at head, the full path runs, and its
errors show. Which path ran is read from the modules a process had loaded when
it exited: the full path loads ``engine.config.config_file`` to validate the config.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, func, select, text

from engine.cli import fast_tick
from engine.runtime import Runtime
from engine.store import database, fingerprints
from engine.store.tables import config_fingerprints, runs
from tests.flows import install
from tests.support import RuntimeFactory, run_cli_modules, write_config

NOW = "2026-03-02T10:00:30Z"  # the hourly echo is next due at 11:00
LATER = "2026-03-02T11:00:30Z"
PREVIOUS = sorted(database.KNOWN_REVISIONS)[-2]  # the revision before head
FLOW = '''
from engine.plugins.authoring import Workflow
wf = Workflow("nightly", period="day")

@wf.step(timeout="1m")
def only(ctx):
    return None
'''


@dataclass(frozen=True)
class Tick:
    returncode: int
    stdout: str
    stderr: str
    validated: bool  # the full path ran: it loaded engine.config.config_file to validate the config


@dataclass
class Project:
    folder: Path
    config: Path
    url: str
    env: dict[str, str]

    def cli(self, *args: str, now: str = NOW) -> Tick:
        proc, modules = run_cli_modules("--now", now, *args, cwd=self.folder, env=self.env)
        return Tick(proc.returncode, proc.stdout, proc.stderr, "engine.config.config_file" in modules)

    def tick(self, *args: str, now: str = NOW) -> Tick:
        return self.cli("tick", *args, now=now)

    def sql(self, statement: str) -> None:
        engine = create_engine(self.url)
        try:
            with engine.begin() as conn:
                conn.execute(text(statement))
        finally:
            engine.dispose()

    def count(self, table: Any) -> int:
        engine = create_engine(self.url)
        try:
            with engine.connect() as conn:
                return int(conn.execute(select(func.count()).select_from(table)).scalar_one())
        finally:
            engine.dispose()


def age(*paths: Path) -> None:
    """Date files a minute back: written well before any tick reads them."""
    for path in paths:
        stamp = path.stat().st_mtime - 60
        os.utime(path, (stamp, stamp))


@pytest.fixture
def project(tmp_path: Path, store_url: str) -> Iterator[Project]:
    """A daily report and an hourly echo, applied at ``NOW`` (nothing due), and a ``[[workflows]]`` file."""
    (tmp_path / "repo").mkdir()
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "nightly.py").write_text(FLOW)
    config = write_config(tmp_path / "reportflow.toml", db_url=store_url, projects=[dict(key="repo", repo="repo")],
                          schedules=[dict(name="repo-daily", workflow="daily_report", project="repo",
                                          cron="30 19 * * *", timezone="UTC"),
                                     dict(name="echo-hourly", workflow="echo", project="repo", cron="0 * * * *",
                                          timezone="UTC")])
    config.write_text(config.read_text() + '\n[[workflows]]\npath = "flows/nightly.py"\n')
    age(config, tmp_path / "flows" / "nightly.py")
    made = Project(tmp_path, config, store_url,
                   {"REPORTFLOW_CONFIG": str(config), "PYTHONPATH": install.pythonpath(tmp_path)})
    applied = made.cli("schedules", "apply")
    assert applied.returncode == 0, applied.stderr
    yield made


def at_any_second(stdout: str) -> str:
    """``stdout`` with the tick's own instant reduced to its minute."""
    return re.sub(r"^tick at (\S+T\d\d:\d\d):\d\dZ:", r"tick at \1:--Z:", stdout, flags=re.M)


def warmed(project: Project) -> Tick:
    """A full tick (which records the fingerprint), then check the next one is fast."""
    full = project.tick()
    assert full.returncode == 0 and full.validated, full.stderr
    fast = project.tick()
    assert fast.returncode == 0 and not fast.validated, fast.stderr
    return full


# --- the same answer ----------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("options", [(), ("--json",)])
def test_the_fast_answer_is_the_full_one_byte_for_byte(project: Project, options: tuple[str, ...]) -> None:
    project.tick()  # records the fingerprint
    fast = project.tick(*options)
    project.sql("DELETE FROM config_fingerprints")  # the same database and inputs, not vouched for any more
    full = project.tick(*options)

    assert (fast.validated, full.validated) == (False, True)
    assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr) == (
        0, full.stdout, "")
    if options:
        assert json.loads(fast.stdout) == {
            "now": NOW, "due_schedules": 0, "handled": 0, "lost_races": 0, "created": {}, "runs_created": 0,
            "already_present": 0, "too_old_slots": 0, "next_due_at": "2026-03-02T11:00:00Z"}
    else:
        assert fast.stdout == f"tick at {NOW}: 0 schedule(s) due, no runs; next due 2026-03-02T11:00:00Z\n"


@pytest.mark.slow
def test_the_log_format_changes_nothing_printed(project: Project) -> None:
    full = warmed(project)
    fast = project.cli("--log-format", "json", "tick")
    assert not fast.validated and (fast.stdout, fast.stderr) == (full.stdout, "")


# --- declined: the full path runs and says what it always said ------------------------------------------

@pytest.mark.slow
def test_a_config_edited_into_an_invalid_one_is_validated_though_nothing_is_due(project: Project) -> None:
    """The fast path never hides an edited file: the tick validates it, leaves the bad schedule out and says so
    in one line (the others go on), and a file broken beyond a schedule exits 2."""
    warmed(project)
    good = project.config.read_text()
    project.config.write_text(good.replace('cron = "0 * * * *"', 'cron = "61 * * * *"'))

    result = project.tick()

    assert result.validated and result.returncode == 0, result.stderr
    assert "is left out, it is invalid" in result.stderr and "schedules[1].cron" in result.stderr, result.stderr
    project.config.write_text(good + "\n[store\n")
    broken = project.tick()
    assert broken.returncode == 2 and broken.stdout == "" and "error [CONFIG_INVALID]" in broken.stderr


@pytest.mark.slow
def test_something_due_creates_its_runs(project: Project) -> None:
    warmed(project)

    result = project.tick(now=LATER)

    assert result.validated and result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"tick at {LATER}: 1 schedule(s) due, 1 QUEUED;"), result.stdout
    assert project.count(runs) == 1


@pytest.mark.slow
def test_a_workflows_file_touched_is_validated_again(project: Project) -> None:
    warmed(project)
    flow = project.folder / "flows" / "nightly.py"
    flow.write_text(FLOW.replace('"nightly"', '"echo"'))  # now clashes with the installed echo
    age(flow)

    clash = project.tick()
    assert clash.validated and clash.returncode == 2 and "workflows[0].path" in clash.stderr, clash.stderr

    flow.write_text(FLOW)
    age(flow)
    assert project.tick().validated  # the same bytes as before, but a new mtime: validated again
    assert not project.tick().validated  # and recorded


@pytest.mark.slow
def test_an_installed_distribution_changing_is_validated_again(project: Project) -> None:
    warmed(project)
    entry_points = install.site_dir(project.folder) / "reportflow_testflows-0.0.dist-info" / "entry_points.txt"
    entry_points.write_text(entry_points.read_text() + "misnamed = tests.flows.testflows:FOUR_STEPS\n")

    result = project.tick()

    assert result.validated and result.returncode == 1, result.stderr
    assert "entry point misnamed (tests.flows.testflows:FOUR_STEPS) is not a workflow named misnamed" in result.stderr


@pytest.mark.slow
def test_a_schema_from_the_future_is_refused_though_the_fingerprint_is_there(project: Project) -> None:
    warmed(project)
    project.sql("UPDATE alembic_version SET version_num = '9999'")

    result = project.tick()

    assert result.validated and result.returncode == 1
    assert "schema revision 9999 is unknown to this reportflow" in result.stderr, result.stderr


@pytest.mark.slow
def test_an_older_schema_is_left_to_the_full_path(project: Project) -> None:
    """SQLite is migrated on first use, PostgreSQL asks for ``db upgrade``: as without the fast path."""
    full = warmed(project)
    engine = database.create_db_engine(project.url)
    try:
        config = Config()
        config.set_main_option("script_location", str(database.MIGRATIONS_DIR))
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, PREVIOUS)
        assert database.current_revision(engine) == PREVIOUS
    finally:
        engine.dispose()

    result = project.tick()

    assert result.validated
    if project.url.startswith("sqlite"):
        # The same answer; its instant may be a second later (--now runs on from 10:00:30, and migrating takes a while).
        assert (result.returncode, at_any_second(result.stdout)) == (0, at_any_second(full.stdout)), result.stderr
        assert not project.tick().validated  # migrated, recorded again
    else:
        assert result.returncode == 1 and "run `reportflow db upgrade`" in result.stderr, result.stderr


# --- recording ------------------------------------------------------------------------------------------

def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "reportflow.toml"
    path.write_text(f'[store]\nurl = "{url}"\n')
    age(path)
    return path


def _recorded(rt: Runtime) -> dict[str, tuple[str, datetime]]:
    with rt.store.read() as conn:
        t = config_fingerprints
        return {r.fingerprint: (r.files, r.recorded_at) for r in conn.execute(select(t))}


def test_remember_records_once_what_was_read(tmp_path: Path, store_url: str, runtime: RuntimeFactory) -> None:
    path = _config(tmp_path, store_url)
    rt = runtime(store_url, base_dir=tmp_path)
    seen = fast_tick.read_inputs(path, None)
    fast_tick.remember(rt, seen)
    first = _recorded(rt)
    assert list(first) == [seen.fingerprint]
    files = dict((p, (size, mtime)) for p, size, mtime in json.loads(first[seen.fingerprint][0]))
    assert str(path) in files and os.path.abspath(fast_tick.__file__) in files

    rt.clock.advance(timedelta(minutes=1))
    fast_tick.remember(rt, seen)
    assert _recorded(rt) == first  # unchanged: not written again


def test_remember_records_nothing_when_the_config_changed_meanwhile(tmp_path: Path, store_url: str,
                                                                    runtime: RuntimeFactory) -> None:
    path = _config(tmp_path, store_url)
    rt = runtime(store_url, base_dir=tmp_path)
    seen = fast_tick.read_inputs(path, None)
    path.write_text(path.read_text() + "\n")  # after it was read, before (or while) it was validated
    fast_tick.remember(rt, seen)
    assert _recorded(rt) == {}

    path.write_text(path.read_text().rstrip("\n") + "\n")  # the bytes read, but touched meanwhile
    assert path.read_bytes() == seen.config_bytes
    fast_tick.remember(rt, seen)
    assert _recorded(rt) == {}


def test_only_the_newest_fingerprints_are_kept(store_url: str, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url)
    start = datetime(2026, 3, 2, tzinfo=UTC)
    with rt.store.write() as conn:
        for n in range(fast_tick.KEEP + 5):
            fingerprints.record(conn, f"{n:064d}", "[]", start + timedelta(minutes=n), keep=fast_tick.KEEP)
        fingerprints.record(conn, f"{0:064d}", '[["x", 1, 2]]', start + timedelta(hours=1), keep=fast_tick.KEEP)
    kept = _recorded(rt)
    assert sorted(kept) == sorted([f"{0:064d}", *(f"{n:064d}" for n in range(6, fast_tick.KEEP + 5))])
    assert kept[f"{0:064d}"][0] == '[["x", 1, 2]]'  # recorded again: refreshed, and kept
