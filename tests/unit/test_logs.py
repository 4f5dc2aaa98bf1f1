"""Log lines from structured fields: JSON keeps every field intact, text stays ``event key=value``."""

from __future__ import annotations

import io
import json
import logging
from datetime import UTC, datetime
from typing import Any

from engine.core import logs


def _emit(formatter: logging.Formatter, name: str, **fields: Any) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger(f"test_logs.{name}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logs.event(logger, logging.WARNING, name, **fields)
    return stream.getvalue().strip()


FIELDS = dict(run=7, key="daily_report:p:2026-09-29", reason="lease expired", note='say "hi" a=b', owner=None,
              retryable=False, at=datetime(2026, 9, 29, 10, 30, 0, 123456, tzinfo=UTC), counts={"MISSED": 2})


def test_json_keeps_every_field_with_its_value_and_type() -> None:
    line = json.loads(_emit(logs.JsonFormatter(), "run_recovered", **FIELDS))
    assert line["event"] == "run_recovered" and line["level"] == "warning"
    assert line["reason"] == "lease expired" and line["note"] == 'say "hi" a=b'
    assert line["run"] == 7 and line["owner"] is None and line["retryable"] is False
    assert line["at"] == "2026-09-29T10:30:00Z" and line["counts"] == {"MISSED": 2}
    assert line["ts"].endswith("Z") and "+00:00" not in line["ts"]


def test_text_is_event_then_key_value_pairs_quoted_when_needed() -> None:
    line = _emit(logs.TextFormatter("%(asctime)s %(levelname)s %(message)s"), "run_recovered", **FIELDS)
    stamp, level, rest = line.split(" ", 2)
    assert len(stamp) == 20 and stamp.endswith("Z") and level == "WARNING"
    assert rest == ('run_recovered run=7 key=daily_report:p:2026-09-29 reason="lease expired" '
                    'note="say \\"hi\\" a=b" owner=- retryable=false at=2026-09-29T10:30:00Z counts={"MISSED": 2}')


def test_a_plain_library_line_still_has_an_event() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("test_logs.plain")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.warning("connection reset by peer")
    line = json.loads(stream.getvalue())
    assert line["event"] == "connection" and line["message"] == "connection reset by peer"
