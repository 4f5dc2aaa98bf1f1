"""The heartbeat tells a database outage (beat again) from a bug (say it once, stop beating)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from engine.core import logs
from engine.core.clock import ManualClock
from engine.execution import lease


def _lease(failure: Exception) -> Any:
    @contextmanager
    def write() -> Iterator[Any]:
        raise failure
        yield  # pragma: no cover

    rt = SimpleNamespace(clock=ManualClock(datetime(2026, 9, 29, tzinfo=UTC)))
    claim = SimpleNamespace(run=SimpleNamespace(id=7, max_runtime_s=600), fence=3)
    return lease.Lease(rt, claim, timedelta(seconds=30), write)  # type: ignore[arg-type]


def test_a_database_error_is_retried_at_the_next_beat(caplog: pytest.LogCaptureFixture) -> None:
    lease = _lease(OperationalError("UPDATE runs", {}, Exception("connection refused")))
    assert lease.beat() is True and lease.beat() is True
    assert [getattr(r, logs.EVENT_ATTR) for r in caplog.records] == ["heartbeat_failed", "heartbeat_failed"]


def test_a_bug_is_logged_once_and_the_heartbeat_stops(caplog: pytest.LogCaptureFixture) -> None:
    lease = _lease(KeyError("fence"))
    assert lease.beat() is False
    assert "heartbeat_crashed" in caplog.text and "heartbeat_failed" not in caplog.text
