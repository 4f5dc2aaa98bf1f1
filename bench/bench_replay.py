"""Coverage: the replay of a real history, and what COLLECT_GIT costs by landing against ``git log``.

1. ``tests.reliability.replay``: this repository's history stretched into two months, daily,
   weekly and team schedules, late pushes, a force-push and back, outages of 3 and 11 days,
   a cron edit; on SQLite and PostgreSQL. Printed: per schedule and project, the commits in
   0, 1 and 2+ reports, and the share placed in the report whose span holds their landing.
What COLLECT_GIT by landing costs against ``git log`` on a large repository: ``bench/bench_placement.py``.

Usage: ``.venv/bin/python bench/bench_replay.py``
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import _common as c
import sqlalchemy as sa

from tests.reliability import replay


def replay_rows() -> tuple[list[list[str]], list[str]]:
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        root = Path(tmp)
        admin = sa.create_engine(c.PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        name = f"rf_bench_replay_{uuid.uuid4().hex[:8]}"
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        pg_url = c.PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
        try:
            from engine.store import database

            engine = database.create_db_engine(pg_url)
            database.upgrade(engine)
            engine.dispose()
            for label, url, where in (("SQLite", f"sqlite:///{root / 'sqlite' / 'replay.db'}", root / "sqlite"),
                                      ("PostgreSQL", pg_url, root / "pg")):
                where.mkdir()
                result = replay.replay(url, where, seed=20260929)
                rows += [[label, *count.row()] for count in result.counts]
                notes.append(f"{label}: {result.cycles} cycles, {result.runs} runs, {result.seconds:.1f} s; "
                             f"COLLECT_GIT {result.collect_s:.2f} s in all against git log {result.git_log_s:.2f} s "
                             f"over the same ranges ({result.collect_s / max(result.git_log_s, 1e-9):.2f}x)")
        finally:
            admin.dispose()
            with sa.create_engine(c.PG_ADMIN_URL, isolation_level="AUTOCOMMIT").connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    return rows, notes


def main() -> None:
    c.parser(__doc__.splitlines()[0]).parse_args()
    c.announce("bench_replay")
    rows, notes = replay_rows()
    print(c.table(["database", "schedule", "project", "commits", "in none", "in one", "in 2+",
                   "placed when landed"], rows))
    for note in notes:
        print(f"- {note}")
    c.save("bench_replay", {"replay": rows, "notes": notes, "machine": c.machine()})


if __name__ == "__main__":
    main()
