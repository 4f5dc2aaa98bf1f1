"""The SQL of marks: values a workflow records once at instants of a named timeline (a *line*).

A line's marks only grow, and each instant is written once. Writers follow a
compare-and-set on the line's version: read the line (``read_line``), decide,
then ``record`` with the version read. ``record`` locks the line's row (``FOR
UPDATE`` on PostgreSQL; SQLite's write lock serialises every writer anyway),
and writes only while the line is still at that version, so two writers that
decided on one state never both extend it: the second is told to read again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from engine.core.clock import Clock
from engine.core.timeline_marks import Mark, MarkLine
from engine.store.handle import Store
from engine.store.run_rows import dialect_insert
from engine.store.tables import mark_lines, marks


def read_line(conn: Connection, line: str) -> MarkLine:
    """The line's version (0 for a line never written) and its marks in time order."""
    version = conn.execute(select(mark_lines.c.version).where(mark_lines.c.line == line)).scalar()
    rows = conn.execute(select(marks.c.at, marks.c.value, marks.c.run_id)
                        .where(marks.c.line == line).order_by(marks.c.at)).all()
    return MarkLine(line, int(version or 0), tuple(Mark(r.at, dict(r.value), r.run_id) for r in rows))


def record(conn: Connection, line: str, version: int, new: Sequence[Mark], now: datetime) -> bool:
    """Add ``new`` to the line if it is still at ``version``; False (nothing written) if it moved on.

    Run inside a write transaction. An instant already marked keeps its first value. With
    nothing new it only confirms the version (a decision that added nothing still rested on it).
    """
    conn.execute(dialect_insert(conn)(mark_lines).values(line=line, version=0)
                 .on_conflict_do_nothing(index_elements=["line"]))
    current = conn.execute(select(mark_lines.c.version).where(mark_lines.c.line == line)
                           .with_for_update()).scalar_one()
    if current != version:
        return False
    if new:  # recording nothing only confirms that the line has not moved on
        conn.execute(dialect_insert(conn)(marks).on_conflict_do_nothing(index_elements=["line", "at"]),
                     [{"line": line, "at": m.at, "value": m.value, "run_id": m.run_id, "created_at": now}
                      for m in new])
        conn.execute(update(mark_lines).where(mark_lines.c.line == line).values(version=version + 1))
    return True


class StoreMarks:
    """The engine's ``MarkBook`` (``engine.plugins.contract``): each call one short transaction."""

    def __init__(self, store: Store, clock: Clock, run_id: int) -> None:
        self.store, self.clock, self.run_id = store, clock, run_id

    def read(self, line: str) -> MarkLine:
        """The line's version and marks, read in a read transaction."""
        with self.store.read() as conn:
            return read_line(conn, line)

    def record(self, line: str, version: int, new: Sequence[Mark]) -> bool:
        """``record`` in a write transaction, each mark stamped with this run unless it names one."""
        stamped = [Mark(m.at, m.value, m.run_id if m.run_id is not None else self.run_id) for m in new]
        with self.store.write() as conn:
            return record(conn, line, version, stamped, self.clock.now())
