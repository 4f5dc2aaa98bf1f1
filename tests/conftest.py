"""Shared fixtures: one store fixture parametrised over SQLite and PostgreSQL.

PostgreSQL: a template database is migrated once per session and every test
gets ``CREATE DATABASE ... TEMPLATE`` (concurrency tests need several real
connections, which rollback-per-test cannot give). With ``CI=true`` an
unreachable server fails the run; elsewhere those tests skip, saying why.
"""

from __future__ import annotations

import gc
import itertools
import os
import queue
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests import support

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

PG_ADMIN_URL = os.environ.get("REPORTFLOW_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
_counter = itertools.count()


def _pg_admin() -> Engine:
    import sqlalchemy as sa

    return sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", pool_pre_ping=True)


def _with_db(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


# The files with the longest tests, longest first (seconds of their longest test on two cores, from `--durations`):
# started first, so that under xdist (`--dist load` hands tests out in this order) none of them is left to run
# alone at the end.
LONGEST_FIRST = (
    "tests/reliability/test_secrets.py", "tests/reliability/test_soak.py",  # 82 s, 71 s
    "tests/reliability/test_lifecycle.py", "tests/reliability/test_replay.py",  # 56 s, 51 s
    "tests/acceptance/test_shutdown.py", "tests/reliability/test_crash_loop.py",  # 49 s, ~45 s
    "tests/reliability/test_races.py", "tests/reliability/test_postgres_faults.py",  # ~40 s, 37 s
    "tests/acceptance/test_dependencies_processes.py", "tests/reliability/test_upgrades.py",  # 28 s, 27 s
    "tests/acceptance/test_processes.py", "tests/acceptance/test_notion_rate_shared.py",  # 22 s, 24 s
    "tests/acceptance/test_children_processes.py", "tests/reliability/test_placement.py",  # ~20 s, ~35 s
)


# Cases of one database only that wait for --long (the marker cannot single out one database of a fixture):
# the races run on PostgreSQL by default (SQLite's writers take turns: its races are the processes tests').
LONG_ONLY = frozenset({
    "tests/reliability/test_races.py::test_racing_ticks_and_workers[sqlite]",
    "tests/integration/test_fast_tick.py::test_the_log_format_changes_nothing_printed[postgres]",
    # Longer periods' placement: each kind on one database by default, every one on both with --long.
    "tests/reliability/test_placement.py::test_months_and_quarters_backfilled_after_on_time_ones_hold_their_own_commits"
    "[sqlite-quarterly_report-quarter-3]",
    "tests/reliability/test_placement.py::test_months_and_quarters_backfilled_after_on_time_ones_hold_their_own_commits"
    "[postgres-monthly_report-month-1]",
    "tests/reliability/test_placement.py::test_sprints_backfilled_after_on_time_ones_hold_their_own_commits[sqlite]",
})


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the cases marked ``long`` unless ``--long``; put the longest files first, in ``LONGEST_FIRST``
    order (the rest keep their order)."""
    if not config.getoption("--long", default=False):
        left_out = [item for item in items if item.get_closest_marker("long") is not None or item.nodeid in LONG_ONLY]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if item.get_closest_marker("long") is None and item.nodeid not in LONG_ONLY]
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Set aside what exists once the tests are collected (modules, classes, the items): the collection after
    each test (``_no_leaks``) then walks only what tests made, a few milliseconds instead of 50."""
    gc.freeze()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """After the test and its fixtures: close the stores it opened through tests/support.py, then collect the
    garbage. An object in a reference cycle (an engine's pool, a connection) is freed only by the collector;
    collected here, the ResourceWarning of one left open fails the test that made it (pyproject.toml makes it an
    error), not whichever test runs when the collector next does."""
    yield
    support.close_stores()
    gc.collect()


def pytest_addoption(parser: pytest.Parser) -> None:
    # Here, not in tests/reliability/conftest.py: pytest reads option hooks only from conftests it loads
    # at start-up, and a plain `pytest --long` from the repository root does not load that one in time.
    parser.addoption("--long", action="store_true", default=False,
                     help="reliability suite (tests/reliability): many more iterations")


class _Dropper:
    """Drops test databases on a thread of its own, off the tests' path.

    A ``DROP DATABASE`` waits 0.5-2 s for the server's file removal and fsyncs;
    no test needs to wait for the previous test's database to go.
    """

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.names: queue.Queue[str | None] = queue.Queue()
        self.failures: list[str] = []
        self.thread = threading.Thread(target=self._drain, name="pg-dropper", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        import sqlalchemy as sa

        admin = sa.create_engine(self.admin_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        while (name := self.names.get()) is not None:
            try:
                with admin.connect() as conn:
                    conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            except Exception as exc:  # noqa: BLE001 - reported at the end of the session
                self.failures.append(f"{name}: {exc.__class__.__name__}: {exc}")
        admin.dispose()

    def close(self) -> None:
        """Drop what is queued, then stop; raises if a database could not be dropped."""
        self.names.put(None)
        self.thread.join(timeout=300)
        if self.failures:
            raise RuntimeError("test databases left behind: " + "; ".join(self.failures[:3]))


@pytest.fixture(scope="session")
def _pg_session() -> Iterator[tuple[str, _Dropper]]:
    """A migrated template database and the dropper, or a skip (a failure in CI) when PostgreSQL is unreachable.

    Names carry the process id: xdist workers and parallel runs never collide.
    """
    import sqlalchemy as sa

    try:
        admin = _pg_admin()
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any connection failure means "no server"
        message = f"PostgreSQL unreachable at {PG_ADMIN_URL}: {exc.__class__.__name__}"
        if IN_CI:
            pytest.fail(message + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(message)
    name = f"rf_tpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    from engine.store import database

    engine = database.create_db_engine(_with_db(PG_ADMIN_URL, name))
    database.upgrade(engine)
    engine.dispose()
    dropper = _Dropper(PG_ADMIN_URL)
    try:
        yield name, dropper
    finally:
        dropper.close()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def pg_template(_pg_session: tuple[str, _Dropper]) -> str:
    """The name of a migrated template database (made once per session and per xdist worker)."""
    return _pg_session[0]


@pytest.fixture
def pg_url(_pg_session: tuple[str, _Dropper]) -> Iterator[str]:
    """A migrated PostgreSQL database of this test's own (``CREATE DATABASE ... TEMPLATE``), dropped after it."""
    import sqlalchemy as sa

    template, dropper = _pg_session
    name = f"rf_t_{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:6]}"
    admin = _pg_admin()
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    finally:
        admin.dispose()
    try:
        yield _with_db(PG_ADMIN_URL, name)
    finally:
        dropper.names.put(name)


runtime = support.runtime  # the typed runtime factory (tests/support.py), for every test


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A migrated SQLite database of this test's own (a copy of the per-process template)."""
    support.copy_migrated_sqlite(tmp_path / "rf.db")
    return f"sqlite:///{tmp_path / 'rf.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both backends, migrated: every test using it runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))
