"""Process start (SPEC §11): what ``--version``, ``--help`` and a nothing-due ``tick`` import.

Each command runs in a fresh interpreter through a wrapper that calls the CLI's
``main`` and, at exit, writes the sorted ``sys.modules`` to a file. The tests
assert that the heavy libraries stay out: a cron line runs ``tick`` every
minute, and every module it imports is paid for every minute. Timing itself is
a benchmark (``bench/bench_cli_start.py``), not a test.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from tests.support import run_cli_modules, write_config

pytestmark = pytest.mark.slow

# The step clients, the web stack, the retry library, metrics, migrations and holiday tables: none is needed to
# start, to print help, or to find that nothing is due.
CLIENTS_AND_SERVERS = ("git", "ollama", "notion_client", "httpx", "httpcore", "starlette", "uvicorn", "jinja2",
                       "tenacity", "prometheus_client", "alembic", "psycopg", "holidays")
NOW = "2026-03-02T10:00:30Z"


def modules_of(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """(the modules loaded when ``reportflow *args`` exits, its stdout); the command must exit 0."""
    proc, modules = run_cli_modules(*args, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return modules, proc.stdout


def loaded(modules: set[str], *packages: str) -> list[str]:
    """The modules of ``packages`` (each a package or module name) that are loaded."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_version_imports_neither_typer_nor_the_engine(tmp_path: Path) -> None:
    modules, stdout = modules_of("--version", cwd=tmp_path)
    assert stdout == f"reportflow {version('reportflow')}\n"
    assert loaded(modules, "typer", "click", "rich", "sqlalchemy", "pydantic", "engine.cli.app", "engine.config",
                  "engine.store", "workflows", "steps", *CLIENTS_AND_SERVERS) == []


def test_version_after_global_options_goes_through_typer_and_prints_the_same(tmp_path: Path) -> None:
    modules, stdout = modules_of("--config", str(tmp_path / "none.toml"), "--version", cwd=tmp_path)
    assert stdout == f"reportflow {version('reportflow')}\n"
    assert loaded(modules, "sqlalchemy", "pydantic", "engine.store", "workflows", "steps") == []


def test_help_imports_no_store_no_config_no_workflow(tmp_path: Path) -> None:
    modules, stdout = modules_of("--help", cwd=tmp_path)
    assert "tick" in stdout and "schedules" in stdout and "--version" in stdout
    # rich prints the help (typer's rich_utils, with markdown_it and pygments); the engine stays unloaded.
    assert loaded(modules, "sqlalchemy", "pydantic", "croniter", "engine.config", "engine.store", "engine.plugins",
                  "engine.runtime", "engine.cli.render", "engine.read", "workflows", "steps",
                  *CLIENTS_AND_SERVERS) == []


@pytest.fixture
def applied(tmp_path: Path) -> dict[str, str]:
    """A config with a daily report and an hourly echo schedule, applied at ``NOW``: nothing is due at ``NOW``."""
    (tmp_path / "repo").mkdir()
    config = write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}",
                          projects=[dict(key="repo", repo="repo")],
                          schedules=[dict(name="repo-daily", workflow="daily_report", project="repo",
                                          cron="30 19 * * *", timezone="UTC"),
                                     dict(name="echo-hourly", workflow="echo", project="repo", cron="0 * * * *",
                                          timezone="UTC")])
    env = {"REPORTFLOW_CONFIG": str(config)}
    modules_of("--now", NOW, "schedules", "apply", cwd=tmp_path, env=env)
    return env


def test_nothing_due_tick_imports_no_client_no_step_no_rich(tmp_path: Path, applied: dict[str, str]) -> None:
    """The first tick of a config takes the full path (it validates the config)."""
    modules, stdout = modules_of("--now", NOW, "tick", cwd=tmp_path, env=applied)

    assert "0 schedule(s) due, no runs" in stdout  # the case measured: nothing due
    assert "sqlalchemy" in modules and "engine.scheduling.tick" in modules  # it did tick
    # Output to a pipe is written plainly: rich (and its markdown, pygments) stays out.
    assert loaded(modules, "rich", "markdown_it", "pygments", "engine.cli.render", *CLIENTS_AND_SERVERS) == []
    # A SQLite tick loads neither the PostgreSQL dialect nor the urllib client of the webhooks.
    assert loaded(modules, "sqlalchemy.dialects.postgresql", "psycopg", "urllib.request") == []
    # Registering the report workflows imports no step; their settings need only the language catalogue.
    assert loaded(modules, "steps") in ([], ["steps", "steps.report_texts"])


def test_the_next_nothing_due_tick_imports_neither_typer_nor_pydantic_nor_the_workflows(
        tmp_path: Path, applied: dict[str, str]) -> None:
    """Once a full tick validated the config, a nothing-due tick takes the fast path (engine.cli.fast_tick):
    what every minute of a cron line pays is SQLAlchemy and one read of the store."""
    full, first = modules_of("--now", NOW, "tick", cwd=tmp_path, env=applied)
    assert "engine.scheduling.tick" in full

    modules, stdout = modules_of("--now", NOW, "tick", cwd=tmp_path, env=applied)

    assert stdout == first and "0 schedule(s) due, no runs" in stdout
    assert "engine.cli.fast_tick" in modules and "sqlalchemy.dialects.sqlite" in modules  # it read the store
    assert loaded(modules, "typer", "click", "rich", "pydantic", "croniter", "engine.cli.app", "engine.config.config_file",
                  "engine.plugins", "engine.runtime", "engine.scheduling", "engine.core.models", "engine.core.schedule_spec",
                  "engine.core.audit", "engine.core.timeline_marks", "engine.core.backup_slots", "engine.store.tables",
                  "engine.store.run_rows", "workflows", "steps", "git", "ollama", "notion_client", "httpx",
                  *CLIENTS_AND_SERVERS) == []
    assert loaded(modules, "sqlalchemy.dialects.postgresql", "urllib.request") == []


@pytest.mark.parametrize("command, says", [(("reconcile",), "recovered 0, failed 0, promoted 0"),
                                           (("work", "--until-idle"), "nothing to do")])
def test_the_rest_of_an_idle_cron_line_stays_as_light(tmp_path: Path, applied: dict[str, str],
                                                     command: tuple[str, ...], says: str) -> None:
    """``tick && reconcile && work --until-idle`` every minute: with nothing to do, no retry library either."""
    modules, stdout = modules_of("--now", NOW, *command, cwd=tmp_path, env=applied)

    assert says in stdout
    assert loaded(modules, "rich", "engine.cli.render", "urllib.request", *CLIENTS_AND_SERVERS) == []
    assert loaded(modules, "steps") in ([], ["steps", "steps.report_texts"])


def test_an_idle_cycle_takes_the_fast_path_with_the_full_paths_report(tmp_path: Path, applied: dict[str, str]) -> None:
    """``* * * * * reportflow cycle``: the first cycle validates and records; an idle one after it is as light as a tick."""
    full, first = modules_of("--now", NOW, "cycle", cwd=tmp_path, env=applied)
    assert "engine.app.cycle" in full and "nothing to do" in first

    modules, stdout = modules_of("--now", NOW, "cycle", cwd=tmp_path, env=applied)

    assert stdout == first  # the same report, printed by the same functions
    assert "engine.cli.fast_tick" in modules
    assert loaded(modules, "typer", "click", "rich", "pydantic", "croniter", "engine.cli.app", "engine.config.config_file",
                  "engine.plugins", "engine.runtime", "engine.scheduling", "engine.execution", "engine.store.tables",
                  "workflows", "steps", *CLIENTS_AND_SERVERS) == []
    _, as_json = modules_of("--now", NOW, "cycle", "--json", cwd=tmp_path, env=applied)
    assert '"runs": []' in as_json and '"due_schedules": 0' in as_json


def test_work_until_idle_with_nothing_to_claim_takes_the_fast_path(tmp_path: Path, applied: dict[str, str]) -> None:
    _, full = modules_of("--now", NOW, "work", "--until-idle", cwd=tmp_path, env=applied)
    modules_of("--now", NOW, "tick", cwd=tmp_path, env=applied)  # validates and records the config

    modules, stdout = modules_of("--now", NOW, "work", "--until-idle", cwd=tmp_path, env=applied)

    assert stdout == full == "nothing to do\n"
    assert "engine.cli.fast_tick" in modules
    assert loaded(modules, "typer", "pydantic", "engine.cli.app", "engine.execution", "engine.store.tables",
                  "workflows", "steps") == []


def test_a_schedule_with_a_holiday_calendar_keeps_the_holiday_tables_off_the_fast_path(tmp_path: Path) -> None:
    """Validating ``calendar = "KR"`` reads the holidays package; a nothing-due tick after it does not."""
    config = write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}", schedules=[
        dict(name="echo-daily", workflow="echo", project="repo", cron="0 9 * * *", timezone="Asia/Seoul",
             calendar="KR")])
    env = {"REPORTFLOW_CONFIG": str(config)}
    modules_of("--now", NOW, "schedules", "apply", cwd=tmp_path, env=env)
    full, first = modules_of("--now", NOW, "tick", cwd=tmp_path, env=env)
    assert "holidays" in full  # the full path validated the calendar

    modules, stdout = modules_of("--now", NOW, "tick", cwd=tmp_path, env=env)

    assert stdout == first and "engine.cli.fast_tick" in modules
    assert loaded(modules, "holidays", "engine.core.calendars") == []
