"""Connections and schema: SQLite pragmas, ``BEGIN IMMEDIATE``, Alembic migrations.

SQLite runs in WAL with ``synchronous=FULL`` (a power cut loses no committed
step) and a 30 s busy timeout; every write transaction starts with
``BEGIN IMMEDIATE`` because a deferred one that upgrades to a writer can fail
with ``SQLITE_BUSY_SNAPSHOT``, which no busy timeout cures. Read-only work can
ask for a deferred ``BEGIN`` with the ``sqlite_begin="DEFERRED"`` execution option.
The threads of one process take turns to write (``write_turn``).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.url import URL, make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from engine.config import defaults
from engine.core import errors, redact
from engine.store import fastsql, locks

HEAD_REVISION = "0016"
KNOWN_REVISIONS = frozenset({"0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009",
                             "0010", "0011", "0012", "0013", "0014", "0015", "0016"})
MIGRATIONS_DIR = Path(__file__).parent / "migrations"
BUSY_TIMEOUT_MS = 30_000
_BEGIN = {mode: f"BEGIN {mode}" for mode in ("IMMEDIATE", "DEFERRED", "EXCLUSIVE")}


class CommitFailed(Exception):
    """A commit made on this thread's behalf (a shared group commit) failed: nothing of it is durable."""


# What a loop outlives: the database went away (restart, failover, a dropped connection).
DATABASE_ERRORS: tuple[type[Exception], ...] = (SQLAlchemyError, CommitFailed)


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database or ``:memory:``)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


_WRITE_TURNS: weakref.WeakKeyDictionary[Engine, threading.Lock] = weakref.WeakKeyDictionary()


@contextmanager
def write_turn(engine: Engine) -> Iterator[None]:
    """Hold this around a write transaction: on SQLite, one thread of this process writes at a time.

    SQLite lets one writer in. A second connection's ``BEGIN IMMEDIATE`` waits in
    SQLite's busy handler, which sleeps 1, 2, 5, 10, 15, 20, 25, 25, ... ms between
    tries: a thread could sleep 25 ms past the moment the lock came free (``serve``'s
    tick and its worker threads write side by side). Threads of one process queue on
    a Python lock instead and go in the moment the writer before them is done; other
    processes still meet the busy handler. Like SQLite, gives up after the busy
    timeout ("database is locked"). Nothing on PostgreSQL. Take the connection first,
    then the turn: a thread waiting for a pooled connection never holds the turn.
    """
    turn = _WRITE_TURNS.get(engine)
    if turn is None:
        yield
        return
    if not turn.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
        raise OperationalError("BEGIN IMMEDIATE", None, sqlite3.OperationalError("database is locked"))
    try:
        yield
    finally:
        turn.release()


def _configure_sqlite(engine: Engine) -> None:
    _WRITE_TURNS[engine] = threading.Lock()

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        fastsql.execute_text(conn, _BEGIN[mode])  # on the cursor: this is on every step boundary's path


def safe_url(url: str) -> str:
    """``url`` fit to print: the password masked (``engine.core.redact``, the one masking function)."""
    return redact.mask_urls(url)


def create_db_engine(url: str, *, pool_size: int = 5) -> Engine:
    """An Engine for ``url`` (``sqlite:///path`` or ``postgresql+psycopg://...``)."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise errors.InvalidInput(f"store url '{safe_url(url)}' is not a database URL") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        problem = defaults.path_problem(defaults.sqlite_file(url) or "")
        if problem is not None:  # --db and REPORTFLOW_DB too (the config's own url is checked at load)
            raise errors.InvalidInput(f"store url '{safe_url(url)[:100]}': the path {problem}")
        path = sqlite_path(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, poolclass=NullPool if path is None else None,
                               connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False})
        _configure_sqlite(engine)
        return engine
    if backend == "postgresql":
        from engine.store import tables

        tables.postgresql_options()
        return create_engine(driver_url(parsed), pool_size=pool_size, max_overflow=10, pool_pre_ping=True)
    raise errors.InvalidInput(f"store url '{safe_url(url)}': only sqlite and postgresql are supported")


def driver_url(parsed: URL) -> URL:
    """A PostgreSQL URL that names no driver gets psycopg 3, the one installed."""
    return parsed.set(drivername="postgresql+psycopg") if parsed.drivername == "postgresql" else parsed


def current_revision(engine: Engine) -> str | None:
    """The Alembic revision the database is at (None for an empty database)."""
    with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return revision_of(conn)


def revision_of(conn: Connection) -> str | None:
    """The revision in ``alembic_version`` (the table must exist)."""
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


MIGRATION_LOCK_KEY = locks.MIGRATION
_BUSY = "another `reportflow db upgrade` is migrating this database; let it finish, then run it again"


def upgrade(engine: Engine, *, target: str = "head", wait: bool = True) -> str:
    """Migrate to ``target`` (serialised across processes) and return the revision reached.

    ``wait=False`` (the ``db upgrade`` command) refuses with ``Conflict`` instead
    of queueing behind another migration; first-use migration waits.
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with _migration_lock(engine, wait=wait), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            if wait:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
            elif not conn.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_KEY}).scalar():
                raise errors.Conflict(_BUSY)
        config.attributes["connection"] = conn
        command.upgrade(config, target)
    return HEAD_REVISION if target == "head" else target


@contextmanager
def file_lock(path: Path | None, *, wait: bool = True) -> Iterator[None]:
    """An exclusive lock on ``path`` across the processes of this host (nothing when None).

    ``wait=False`` raises ``Conflict`` when another process holds it.
    """
    if path is None:
        yield
        return
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise errors.Conflict(_BUSY) from None
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def migration_lock_path(engine: Engine) -> Path | None:
    """The lock file beside a SQLite database that serialises its migrations (None for PostgreSQL)."""
    path = sqlite_path(str(engine.url))
    return None if path is None else path.with_name(path.name + ".migrate.lock")


def _migration_lock(engine: Engine, *, wait: bool = True) -> AbstractContextManager[None]:
    return file_lock(migration_lock_path(engine), wait=wait)


def ensure_schema(engine: Engine, *, auto_migrate: bool) -> None:
    """Make sure the schema is one this code knows.

    SQLite (``auto_migrate``) is migrated on first use. A database at a
    revision this code does not know (a newer release migrated it) is refused.
    """
    try:
        revision = current_revision(engine)
    except OperationalError as exc:
        reason = (str(exc.orig).strip().splitlines() or [type(exc.orig).__name__])[0]  # one line, no SQL
        raise errors.ReportflowError(f"cannot reach the database at {engine.url!r}: {reason}") from exc
    if revision == HEAD_REVISION:
        return
    if revision is not None and revision not in KNOWN_REVISIONS:
        raise errors.SchemaMismatch(
            f"database schema revision {revision} is unknown to this reportflow (knows up to {HEAD_REVISION}); "
            "upgrade reportflow on this node")
    if auto_migrate:
        upgrade(engine)
        return
    raise errors.SchemaMismatch(
        f"database schema is at {revision or 'nothing'}, this reportflow needs {HEAD_REVISION}: "
        "run `reportflow db upgrade`")
