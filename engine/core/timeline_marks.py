"""Marks: values a workflow recorded at instants of its timelines, written once and never changed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Mark:
    """A value a workflow recorded at an instant of one of its timelines (a *line*).

    Marks are written once (the first writer of an instant wins) and never change:
    a report workflow keeps the branch heads as they stood at its windows' edges
    here, so that consecutive reports agree on where one ends and the next begins.
    """

    at: datetime
    value: dict[str, Any]
    run_id: int | None = None


@dataclass(frozen=True)
class MarkLine:
    """Every mark of one line, in time order, and the line's version (a compare-and-set token)."""

    line: str
    version: int
    marks: tuple[Mark, ...] = ()
