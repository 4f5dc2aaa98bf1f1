"""fastsql sends what ``conn.execute`` would: the same SQL, parameters and bind processing, per dialect."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event

from engine.store import attempt_rows, claims, fastsql, promotion
from engine.store.handle import Store

NOW = datetime(2026, 9, 29, 10, 30, 15, 123456, tzinfo=UTC)

# The worker's hot statements, with parameters of the kinds their callers pass (instants, JSON, text, numbers).
CASES: dict[str, tuple[Any, dict[str, Any]]] = {
    "claim": (claims._CLAIM, {"b_id": 1, "b_owner": "host:1", "b_lease": NOW, "b_fence": 2, "b_now": NOW,
                              "b_attempt": 1}),
    "check fence": (claims._CHECK, {"b_id": 1, "b_fence": 2, "b_now": NOW}),
    "hold": (claims._HOLD, {"b_id": 1, "b_fence": 2, "b_lease": NOW}),
    "hold with pins": (claims._HOLD_PINNED, {"b_id": 1, "b_fence": 2, "b_lease": NOW,
                                             "b_pinned": {"window_start": "2026-09-29T00:00:00Z", "n": 1}}),
    "start step": (claims._START_STEP, {"b_run": 1, "b_pos": 0, "b_now": NOW}),
    "step end": (claims._STEP_END, {"b_run": 1, "b_pos": 0, "b_status": "SUCCESS", "b_now": NOW, "b_code": None,
                                    "b_message": None, "b_output": {"value": "é", "items": [1, 2]}}),
    "step failed": (claims._STEP_FAILED, {"b_run": 1, "b_pos": 0, "b_status": "FAILED", "b_now": NOW,
                                          "b_code": "X", "b_message": "it failed"}),
    "next step": (claims._NEXT_STEP, {"b_run": 1, "b_pos": 0, "b_next": 1, "b_status": "SUCCESS",
                                      "b_output": {"value": 1}, "b_now": NOW}),
    "finish attempt": (attempt_rows._FINISH_ATTEMPT, {"b_run": 1, "b_number": 1, "b_outcome": "success",
                                                      "b_now": NOW, "b_code": None, "b_message": None}),
    "busy": (promotion._BUSY, {"b_schedule": 1}),
    "promote": (promotion._PROMOTE, {"b_id": 1}),
}


def _comparable(args: Any) -> Any:
    """DBAPI parameters with psycopg's ``Json`` wrappers (no equality of their own) as (type, value)."""
    def plain(value: Any) -> Any:
        return (type(value).__name__, value.obj) if type(value).__name__ in ("Json", "Jsonb") else value

    if isinstance(args, dict):
        return {k: plain(v) for k, v in args.items()}
    return tuple(plain(v) for v in args)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store.open(store_url, auto_migrate=True)
    yield opened
    opened.dispose()


def _sent(store: Store, run: Any) -> list[tuple[str, Any]]:
    """What reached the DBAPI cursor while ``run(conn)`` ran, in a transaction rolled back after."""
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        sent.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        with store.engine.connect() as conn:
            with conn.begin() as tx:
                run(conn)
                tx.rollback()
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    return sent


@pytest.mark.parametrize("case", sorted(CASES))
def test_fastsql_compiles_what_conn_execute_sends(store: Store, case: str) -> None:
    stmt, params = CASES[case]
    (expected,) = _sent(store, lambda conn: conn.execute(stmt, params))
    with store.engine.connect() as conn:
        compiled = fastsql.prepared(stmt, conn.dialect)
    if compiled.expanding:  # an IN list rendered per call: handed to conn.execute, so the same by construction
        assert _sent(store, lambda conn: fastsql.execute(conn, stmt, params)) == [expected]
        return
    assert compiled.sql == expected[0]
    assert _comparable(compiled.args(params)) == _comparable(expected[1])  # the same values, the same processing


@pytest.mark.parametrize("case", ["step end", "hold with pins", "claim"])
def test_fastsql_executes_it_with_the_same_result(store: Store, case: str) -> None:
    stmt, params = CASES[case]
    sent: list[Any] = []
    _sent(store, lambda conn: sent.append(fastsql.execute(conn, stmt, params).rowcount))
    expected: list[Any] = []
    _sent(store, lambda conn: expected.append(conn.execute(stmt, params).rowcount))
    assert sent == expected
