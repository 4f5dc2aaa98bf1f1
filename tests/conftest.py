"""Shared fixtures: one store fixture parametrised over SQLite and PostgreSQL.

PostgreSQL: a template database is migrated once per session and every test
gets ``CREATE DATABASE ... TEMPLATE`` (concurrency tests need several real
connections, which rollback-per-test cannot give). With ``CI=true`` an
unreachable server fails the run; elsewhere those tests skip, saying why.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

PG_ADMIN_URL = os.environ.get("REPORTFLOW_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
_counter = itertools.count()


def _pg_admin():  # type: ignore[no-untyped-def]
    import sqlalchemy as sa

    return sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", pool_pre_ping=True)


def _with_db(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


def pytest_addoption(parser: pytest.Parser) -> None:
    # Here, not in tests/reliability/conftest.py: pytest reads option hooks only from conftests it loads
    # at start-up, and a plain `pytest --long` from the repository root does not load that one in time.
    parser.addoption("--long", action="store_true", default=False,
                     help="reliability suite (tests/reliability): many more iterations")


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A migrated template database, or a skip (a failure in CI) when PostgreSQL is unreachable."""
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
    try:
        yield name
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    import sqlalchemy as sa

    name = f"rf_t_{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:6]}"
    admin = _pg_admin()
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"'))
    try:
        yield _with_db(PG_ADMIN_URL, name)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A migrated SQLite database of this test's own (a copy of the per-process template)."""
    from tests import support

    support.copy_migrated_sqlite(tmp_path / "rf.db")
    return f"sqlite:///{tmp_path / 'rf.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both backends, migrated: every test using it runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]
