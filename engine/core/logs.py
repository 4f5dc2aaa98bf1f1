"""Logging: one line per decision, as text or JSON, from structured fields.

The engine logs through ``event(logger, level, "run_claimed", run=3, key=...)``:
the event name and its fields travel on the record (``extra``), so the JSON
format emits each field with its value intact, and the text format renders
``event key=value ...`` for people (values with spaces or quotes are quoted).
Instants are UTC ISO 8601 ending in ``Z``, at second precision in text and
millisecond precision in JSON's ``ts`` (ordering lines of several processes).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, date, datetime, timedelta
from typing import Any

from engine.core import limits, redact
from engine.core.clock import format_instant

EVENT_ATTR = "rf_event"
FIELDS_ATTR = "rf_fields"


def _plain(value: Any) -> Any:
    """A JSON-ready value: instants in the one ``Z`` format, everything else as is or as text."""
    if isinstance(value, datetime):
        return format_instant(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, str):
        return redact.clip(value)  # an error's text may be megabytes (limits.ERROR_TEXT)
    if value is None or isinstance(value, int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _text_value(plain: Any) -> str:
    """One field's text form; ``plain`` is already ``_plain``'d."""
    if plain is None:
        return "-"
    if isinstance(plain, bool):
        return "true" if plain else "false"
    if isinstance(plain, list | dict):
        return json.dumps(plain, ensure_ascii=False)
    text = str(plain)
    if not text or not text.isprintable() or any(c in text for c in ' "='):
        # JSON escapes newlines and ESC; what it leaves raw (bidi overrides, C1 controls) goes.
        return redact.neutralise(json.dumps(text, ensure_ascii=False))
    return text


def render(name: str, fields: dict[str, Any]) -> str:
    """The text form of plain fields: ``name key=value ...``."""
    return " ".join([name, *(f"{key}={_text_value(value)}" for key, value in fields.items())])


class _Line:
    """The text form of an event, rendered only if a handler formats it (JSON reads the fields)."""

    __slots__ = ("name", "fields")

    def __init__(self, name: str, fields: dict[str, Any]) -> None:
        self.name, self.fields = name, fields

    def __str__(self) -> str:
        return render(self.name, self.fields)


def event(logger: logging.Logger, level: int, name: str, /, exc_info: bool = False, **fields: Any) -> None:
    """Log event ``name`` with structured ``fields`` (cheap when the level is disabled)."""
    if not logger.isEnabledFor(level):
        return
    plain = {key: _plain(value) for key, value in fields.items()}
    logger.log(level, "%s", _Line(name, plain), exc_info=exc_info, extra={EVENT_ATTR: name, FIELDS_ATTR: plain})


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, event, the event's fields, message."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON object: ts, level, logger, event, its fields, message."""
        stamp = datetime.fromtimestamp(record.created, UTC)
        payload: dict[str, Any] = {
            "ts": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        message = _message(record)
        fields = getattr(record, FIELDS_ATTR, None)
        # A line from a library (or a plain log call) has no event: its first word stands in for one.
        payload["event"] = getattr(record, EVENT_ATTR, None) or message.partition(" ")[0][:100]
        if fields:
            payload.update({k: v for k, v in fields.items() if k not in payload})
        payload["message"] = message
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return redact.mask_urls(json.dumps(payload, ensure_ascii=False))

    def formatException(self, ei: Any) -> str:  # noqa: N802
        """The traceback with each line cut to ``limits.ERROR_TEXT`` (an exception's text may be huge)."""
        return _clipped_lines(super().formatException(ei))


def _message(record: logging.LogRecord) -> str:
    """A record's message as one inert line; a library's (a server's answer, maybe huge) also clipped."""
    message = record.getMessage()
    if getattr(record, EVENT_ATTR, None) is None:
        return redact.error_text(message, inert=True)
    return redact.neutralise(redact.mask_urls(message))


def _clipped_lines(text: str) -> str:
    return "\n".join(redact.clip(line) for line in text.split("\n"))


class TextFormatter(logging.Formatter):
    """``2026-09-29T10:30:00Z INFO run_claimed run=3 key=...`` (UTC, second precision)."""

    _last: tuple[int, str] = (-1, "")  # (second, its text), replaced as one tuple: threads share it

    def format(self, record: logging.LogRecord) -> str:
        """The line, with URL passwords masked and a library's raw text (a server's answer) made one inert line."""
        message = record.getMessage()
        if not message.isprintable() or "@" in message or len(message) > limits.ERROR_TEXT:
            record = logging.makeLogRecord(record.__dict__)
            record.msg, record.args = _message(record), None
        return redact.mask_urls(super().format(record))

    def formatException(self, ei: Any) -> str:  # noqa: N802
        """The traceback with each line cut to ``limits.ERROR_TEXT`` (an exception's text may be huge)."""
        return _clipped_lines(super().formatException(ei))

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        """The record's time as ISO 8601 UTC at second precision (each second formatted once)."""
        second, stamp = self._last
        if int(record.created) != second:  # a busy worker logs many lines a second: format each once
            second = int(record.created)
            stamp = format_instant(datetime.fromtimestamp(second, UTC)) or ""
            self._last = (second, stamp)
        return stamp


def configure(fmt: str = "text", level: int = logging.INFO) -> None:
    """Send the engine's log lines to stderr, as ``text`` or ``json``, from ``level`` up."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Neither format prints the caller, the thread or the process: skip collecting them for
    # every record (the logging HOWTO's "Optimization"; a busy worker logs per step).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    for noisy in ("httpx", "httpcore", "alembic", "notion_client", "git"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
