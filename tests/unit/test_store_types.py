"""UTCDateTime on SQLite: the stored text is SQLAlchemy's DATETIME form, so text order is time order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import DateTime
from sqlalchemy.dialects import sqlite

from engine.store.types import UTCDateTime

DIALECT = sqlite.dialect()
SQLALCHEMY_TEXT = DateTime().dialect_impl(DIALECT).bind_processor(DIALECT)
OURS = UTCDateTime().dialect_impl(DIALECT).bind_processor(DIALECT)

INSTANTS = [datetime(2026, 9, 29, 0, 1, tzinfo=UTC), datetime(2026, 3, 29, 1, 30, 5, 7, tzinfo=UTC),
            datetime(999, 1, 2, 3, 4, 5, 999999, tzinfo=UTC),
            datetime(2026, 11, 1, 1, 30, tzinfo=timezone(timedelta(hours=-4)))]


@pytest.mark.parametrize("instant", INSTANTS, ids=str)
def test_sqlite_text_is_sqlalchemys_datetime_text_of_the_utc_instant(instant: datetime) -> None:
    assert SQLALCHEMY_TEXT is not None and OURS is not None
    assert OURS(instant) == SQLALCHEMY_TEXT(instant.astimezone(UTC).replace(tzinfo=None))


def test_sqlite_text_sorts_as_time_and_naive_values_are_refused() -> None:
    assert OURS is not None
    later = [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=n * 999_999) for n in range(50)]
    assert sorted(later, key=OURS) == later
    assert OURS(None) is None
    with pytest.raises(ValueError, match="aware datetime"):
        OURS(datetime(2026, 1, 1))
