"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC instants: ``timestamptz`` on PostgreSQL, fixed-width text on SQLite.

    SQLite has no zone-aware type, so values are stored as naive UTC (SQLAlchemy's
    fixed ``YYYY-MM-DD HH:MM:SS.ffffff`` form keeps text comparison = time order)
    and come back aware.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> datetime | None:
        """An aware instant as the database stores it (UTC; naive values refused)."""
        if value is None:
            return None
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise ValueError(f"expected an aware datetime, got {value!r}")
        instant: datetime = value.astimezone(UTC)
        return instant.replace(tzinfo=None) if dialect.name == "sqlite" else instant

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        """On SQLite one C-level formatting call per value instead of two Python layers.

        Every instant the worker writes passes here (about 15 per run); the text is exactly
        SQLAlchemy's SQLite ``DATETIME`` form (tests/unit/test_store_types.py holds it so).
        """
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)

        def to_text(value: Any) -> str | None:
            if value is None:
                return None
            if not isinstance(value, datetime) or value.tzinfo is None:
                raise ValueError(f"expected an aware datetime, got {value!r}")
            return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")

        return to_text

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """A stored instant as an aware UTC datetime."""
        if value is None:
            return None
        stored: datetime = value
        return stored.replace(tzinfo=UTC) if stored.tzinfo is None else stored.astimezone(UTC)
