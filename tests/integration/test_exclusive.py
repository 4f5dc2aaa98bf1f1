"""``Store.exclusive`` on PostgreSQL: one holder at a time, however long it holds (issue 21, item 8)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import sqlalchemy as sa

from engine.store import locks
from engine.store.handle import Store

pytestmark = pytest.mark.postgres

IDLE_TIMEOUT = timedelta(milliseconds=200)
GENERATION = IDLE_TIMEOUT * 5  # a generation far longer than the server tolerates an idle transaction
NAME = "ollama:http://gpu:11434"
KEY = locks.named(NAME)


def test_the_lock_outlives_idle_in_transaction_timeout_and_two_holders_never_overlap(pg_url: str) -> None:
    ms = int(IDLE_TIMEOUT.total_seconds() * 1000)
    url = f"{pg_url}?options=-c%20idle_in_transaction_session_timeout%3D{ms}"
    store = Store.open(url, auto_migrate=True)
    observer = sa.create_engine(pg_url)
    intervals: dict[str, tuple[float, float]] = {}
    errors: list[BaseException] = []
    a_inside, b_waiting = threading.Event(), threading.Event()
    a_states: list[str] = []

    def holder_a() -> None:
        try:
            with store.exclusive(NAME):
                start = time.monotonic()
                a_inside.set()
                assert b_waiting.wait(10)
                # The generation: far longer than idle_in_transaction_session_timeout.
                threading.Event().wait(GENERATION.total_seconds())
                with observer.connect() as conn:
                    # This lock only: pg_locks is server-wide, and tests running beside this one in
                    # other databases hold advisory locks of their own inside open transactions.
                    a_states.extend(conn.execute(sa.text(
                        "SELECT a.state FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                        "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                        "AND l.classid = :high AND l.objid = :low"),
                        {"high": (KEY >> 32) & 0xFFFFFFFF, "low": KEY & 0xFFFFFFFF}).scalars())
                intervals["a"] = (start, time.monotonic())
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    def holder_b() -> None:
        try:
            assert a_inside.wait(10)
            b_waiting.set()
            with store.exclusive(NAME):
                intervals["b"] = (time.monotonic(), time.monotonic())
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=holder_a), threading.Thread(target=holder_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    store.dispose()
    observer.dispose()
    assert not errors, errors
    assert a_states == ["idle"], "the holder's session keeps the lock, with no transaction open"
    assert intervals["a"][1] - intervals["a"][0] >= GENERATION.total_seconds()
    assert intervals["b"][0] >= intervals["a"][1], "the second generation started while the first was running"
