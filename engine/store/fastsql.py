"""The worker's hot statements, executed below SQLAlchemy's per-call pipeline (SPEC §11).

``execute(conn, stmt, params)`` compiles a Core statement once per dialect
(and, for an INSERT, per set of column keys) into the driver's SQL string and
the bind processors of its parameters, then runs it on the DBAPI cursor of
``conn``'s current transaction. The SQL is what ``conn.execute`` would send
and stays defined in Core; what is skipped is the per-call cache lookup,
execution context, events and result wrapping (~30 µs a statement on this
machine, as much as SQLite's own work for a one-row write).

Callers get the DBAPI cursor (``fetchone``, ``fetchall``, ``rowcount``) with
the driver's raw values: use it for writes, guards and scalar reads, never for
rows that need result processing (instants, JSON). A driver error is raised as
SQLAlchemy's ``DBAPIError``; a dropped connection invalidates ``conn``, as
``conn.execute`` would do. A statement with an expanding (``IN``-list) parameter, whose SQL
depends on the list, is handed to ``conn.execute`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Insert
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.sql.expression import Executable


@dataclass(frozen=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]  # every parameter, in order for a positional paramstyle (SQLite's qmark)
    positional: bool
    processors: dict[str, Callable[[Any], Any]]
    fixed: dict[str, Any]  # values built into the statement (``.values(status="RUNNING")``)
    expanding: bool = False  # an IN list rendered per call: this statement goes through ``conn.execute``

    def args(self, params: Mapping[str, Any]) -> Any:
        fixed = self.fixed
        values = [(params[n] if n in params else fixed[n]) if p is None else p(params[n] if n in params else fixed[n])
                  for n, p in self.plan]
        return tuple(values) if self.positional else dict(zip(self.names, values, strict=True))

    @cached_property
    def plan(self) -> tuple[tuple[str, Callable[[Any], Any] | None], ...]:
        """Each parameter with its bind processor (or None), in order: one pass per call."""
        return tuple((n, self.processors.get(n)) for n in self.names)


_cache: dict[tuple[int, str, tuple[str, ...]], tuple[ClauseElement, _Compiled]] = {}


def _compile(stmt: ClauseElement, dialect: Dialect, keys: tuple[str, ...]) -> _Compiled:
    compiled = stmt.compile(dialect=dialect, column_keys=list(keys) if keys else None)
    assert isinstance(compiled, SQLCompiler)  # a DML or SELECT statement, not DDL
    processors: dict[str, Callable[[Any], Any]] = {}
    fixed: dict[str, Any] = {}
    rendered: list[str] = []  # each parameter by the name the SQL gives it (an anonymous bind's is status_1)
    for key, bind in compiled.binds.items():
        name = compiled.bind_names.get(bind, key)
        if name not in rendered:
            rendered.append(name)
        processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if processor is not None:
            processors[name] = processor
        if not bind.required and name not in keys:
            fixed[name] = bind.effective_value
    if any(bind.expanding for bind in compiled.binds.values()):
        return _Compiled(str(compiled), (), False, {}, {}, expanding=True)
    positional = bool(compiled.positional)
    names = tuple(compiled.positiontup or ()) if positional else tuple(rendered)
    return _Compiled(str(compiled), names, positional, processors, fixed)


def prepared(stmt: ClauseElement, dialect: Dialect, keys: tuple[str, ...] = ()) -> _Compiled:
    """``stmt`` compiled for ``dialect`` (and an INSERT's column ``keys``), once: its SQL, parameters, processors."""
    key = (id(stmt), dialect.name, keys)
    hit = _cache.get(key)
    if hit is None or hit[0] is not stmt:  # the statement is kept in the entry, so its id is never reused
        hit = _cache[key] = (stmt, _compile(stmt, dialect, keys))
    return hit[1]


def execute(conn: Connection, stmt: ClauseElement, params: Mapping[str, Any]) -> Any:
    """Run ``stmt`` with ``params`` on ``conn``'s transaction; returns the DBAPI cursor."""
    keys = tuple(params) if isinstance(stmt, Insert) else ()
    compiled = prepared(stmt, conn.dialect, keys)
    if compiled.expanding:  # the result offers the same fetchone / fetchall / rowcount
        return conn.execute(cast(Executable, stmt), dict(params))
    return _run(conn, compiled, compiled.args(params), many=False)


def execute_many(conn: Connection, stmt: Insert, rows: Sequence[Mapping[str, Any]]) -> Any:
    """An INSERT of several rows with the same keys (``executemany``)."""
    compiled = prepared(stmt, conn.dialect, tuple(rows[0]))
    return _run(conn, compiled, [compiled.args(r) for r in rows], many=True)


def execute_text(conn: Connection, sql: str) -> Any:
    """A fixed statement without parameters (``BEGIN IMMEDIATE``) on ``conn``'s DBAPI connection."""
    return _run(conn, _Compiled(sql, (), True, {}, {}), (), many=False)


def _run(conn: Connection, compiled: _Compiled, args: Any, *, many: bool) -> Any:
    dbapi_conn = conn.connection
    cursor = dbapi_conn.cursor()
    try:
        if many:
            cursor.executemany(compiled.sql, args)
        else:
            cursor.execute(compiled.sql, args)
    except conn.dialect.loaded_dbapi.Error as exc:
        dropped = conn.dialect.is_disconnect(exc, dbapi_conn.dbapi_connection, cursor)
        if dropped:
            conn.invalidate(exc)
        raise DBAPIError.instance(compiled.sql, args, exc, conn.dialect.loaded_dbapi.Error,
                                  connection_invalidated=dropped, dialect=conn.dialect) from exc
    return cursor
