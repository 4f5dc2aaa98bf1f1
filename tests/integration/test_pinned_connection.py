"""A worker's kept connection survives the server dropping it while idle (pg_terminate_backend)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from engine.execution.group_commit import PinnedWriter
from engine.store import database

pytestmark = pytest.mark.postgres


def _backend_pid(writer: PinnedWriter) -> int:
    with writer.write() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _terminate(pg_url: str, pid: int) -> None:
    admin = database.create_db_engine(pg_url)
    with admin.begin() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
    admin.dispose()


def test_an_idle_kept_connection_killed_by_the_server_is_replaced_before_use(pg_url: str) -> None:
    engine = database.create_db_engine(pg_url)
    writer = PinnedWriter(engine, idle_recheck_s=0.0)  # every transaction counts as after an idle spell
    first = _backend_pid(writer)
    _terminate(pg_url, first)
    assert _backend_pid(writer) != first  # no "terminating connection due to administrator command"
    writer.close()
    engine.dispose()


def test_a_busy_kept_connection_is_reused_without_a_ping(pg_url: str) -> None:
    engine = database.create_db_engine(pg_url)
    writer = PinnedWriter(engine, idle_recheck_s=3600.0)
    first = _backend_pid(writer)
    assert _backend_pid(writer) == first
    _terminate(pg_url, first)
    with pytest.raises(Exception, match="terminat"):  # the cost of skipping the ping: the next use fails once
        _backend_pid(writer)
    assert _backend_pid(writer) != first  # ... and the invalidated connection is then replaced
    writer.close()
    engine.dispose()
