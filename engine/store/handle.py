"""Persistence: SQLAlchemy Core tables, the SQL store, migrations.

``Store`` owns the SQLAlchemy engine and hands out transactions; the
functions in ``engine.store.schedule_rows`` and ``engine.store.run_rows`` run inside
them. Rows never leave this package: callers get ``engine.core``'s frozen objects (``models``, ``schedule_spec``,
``audit``, ``timeline_marks``).
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

# Only ``database`` here: a nothing-due ``tick`` (engine.cli.fast_tick) imports modules of this package
# without the table definitions and the run queries (SPEC §11).
from engine.core import errors
from engine.store import database, locks


class Store:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self._local_mutexes: dict[str, threading.Lock] = {}

    @classmethod
    def open(cls, url: str, *, auto_migrate: bool | None = None) -> Store:
        """Connect and check the schema; SQLite is migrated on first use unless told otherwise."""
        engine = database.create_db_engine(url)
        migrate = engine.dialect.name == "sqlite" if auto_migrate is None else auto_migrate
        database.ensure_schema(engine, auto_migrate=migrate)
        return cls(engine)

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction (``BEGIN IMMEDIATE`` on SQLite); commits on success."""
        with self.engine.connect() as conn, database.write_turn(self.engine), conn.begin():
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only transaction that does not take SQLite's write lock."""
        with self.engine.connect().execution_options(sqlite_begin="DEFERRED") as conn, conn.begin():
            yield conn

    @contextmanager
    def exclusive(self, name: str, *, wait: bool = True) -> Iterator[None]:
        """A mutex across every process sharing this store (e.g. one generation per Ollama host).

        PostgreSQL: a session advisory lock (all nodes), committed at once so no
        transaction stays open while the caller works: an open one would hold VACUUM
        back and, under ``idle_in_transaction_session_timeout``, get the session killed
        and the lock silently dropped. SQLite: a file lock beside the database (SQLite
        serves one host). ``wait=False`` raises ``Conflict`` at once when another holder
        has it (a web request must not queue behind a generation).
        """
        key = locks.named(name)
        busy = errors.Conflict(f"'{name}' is held by another process or thread")
        if self.dialect == "postgresql":
            with self.engine.connect() as conn:
                if wait:
                    conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
                elif not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar_one():
                    conn.commit()
                    raise busy
                conn.commit()  # a session lock outlives the transaction that took it
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                    conn.commit()
            return
        path = database.sqlite_path(str(self.engine.url))
        lock_file = None if path is None else path.with_name(f"{path.name}.{key & 0xFFFFFFFF:08x}.lock")
        # flock is per process: a thread lock keeps two threads of this process apart too.
        mutex = self._local_mutexes.setdefault(name, threading.Lock())
        if not mutex.acquire(blocking=wait):
            raise busy
        try:
            with database.file_lock(lock_file, wait=wait):
                yield
        finally:
            mutex.release()

    @contextmanager
    def slot(self, name: str, count: int, *, wait: bool = True) -> Iterator[int]:
        """One of ``count`` slots of the pool ``name`` across every process sharing this store (e.g. the
        generations a model host runs at once); yields its number. ``count`` 1 is ``exclusive(name)`` itself.

        Every slot is tried without waiting, from a random one on (so callers spread over the slots); when
        all are held, this waits for that first one, or raises ``Conflict`` at once with ``wait=False``.
        """
        if count <= 1:
            with self.exclusive(name, wait=wait):
                yield 0
            return
        first = random.randrange(count)
        order = [(first + i) % count for i in range(count)]
        with contextlib.ExitStack() as held:
            taken = None
            for number in order:
                try:
                    held.enter_context(self.exclusive(f"{name}#{number}", wait=False))
                except errors.Conflict:
                    continue
                taken = number
                break
            if taken is None:
                if not wait:
                    raise errors.Conflict(f"all {count} slots of '{name}' are held")
                held.enter_context(self.exclusive(f"{name}#{first}"))
                taken = first
            yield taken

    def slots_held(self, name: str, count: int) -> int:
        """How many of the ``count`` slots of the pool ``name`` are held now, by any process: each is tried
        without waiting and let go at once (a holder's wait for it is never longer than that try)."""
        held = 0
        for one in [name] if count <= 1 else [f"{name}#{number}" for number in range(count)]:
            try:
                with self.exclusive(one, wait=False):
                    pass
            except errors.Conflict:
                held += 1
        return held

    def reserve_rate_slot(self, name: str, interval: timedelta, now: datetime) -> datetime:
        """Reserve the next slot of the shared rate limit ``name`` in its own short
        write transaction (see ``rate_limits.reserve_rate_slot``) and return it."""
        from engine.store import rate_limits

        with self.write() as conn:
            return rate_limits.reserve_rate_slot(conn, name, interval, now)

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
