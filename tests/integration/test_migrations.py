"""The Alembic migrations build exactly the schema the code describes."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from engine.core import errors
from engine.store import database
from engine.store.tables import metadata
from tests.support import connected, disposing


def test_upgrade_head_matches_the_models(store_url: str) -> None:
    with disposing(database.create_db_engine(store_url)) as engine:
        database.upgrade(engine)
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
        assert diff == []
        assert database.current_revision(engine) == database.HEAD_REVISION


def test_head_constant_is_alembic_head() -> None:
    config = Config()
    config.set_main_option("script_location", str(database.MIGRATIONS_DIR))
    script = ScriptDirectory.from_config(config)
    assert script.get_current_head() == database.HEAD_REVISION
    assert {rev.revision for rev in script.walk_revisions()} == set(database.KNOWN_REVISIONS)


def test_sqlite_is_migrated_on_first_use_in_wal(tmp_path: Path) -> None:
    from engine.store.handle import Store

    fresh = tmp_path / "fresh.db"  # not the sqlite_url fixture: that one is migrated already
    assert not fresh.exists()
    store = Store.open(f"sqlite:///{fresh}")
    with disposing(store.engine):
        assert database.current_revision(store.engine) == database.HEAD_REVISION
        with store.read() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one() >= 30000


def test_a_schema_from_the_future_is_refused(store_url: str) -> None:
    with disposing(database.create_db_engine(store_url)) as engine:
        database.upgrade(engine)
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        with pytest.raises(errors.SchemaMismatch, match="9999"):
            database.ensure_schema(engine, auto_migrate=True)


def test_postgres_is_not_migrated_implicitly(pg_url: str) -> None:
    with connected(pg_url) as conn:
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
        conn.commit()
    with disposing(database.create_db_engine(pg_url)) as engine, pytest.raises(errors.SchemaMismatch,
                                                                                 match="db upgrade"):
        database.ensure_schema(engine, auto_migrate=False)
