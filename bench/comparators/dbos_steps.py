"""DBOS Transact: the trivial 4-step workflow, run N times in one process, SQLite system database.

Runs in the bench venv (``.venv-bench``), never in the project's. The SQLite
file is switched to WAL before DBOS opens it (``journal_mode`` persists in
the file) and ``synchronous`` is left at SQLite's default, FULL: the same
durability as the engine's. Prints one JSON line: seconds for N workflows,
steps checkpointed, and the pragmas DBOS's own connections report.
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from dbos import DBOS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-dbos-"))
    db_path = tmp / "dbos_sys.sqlite"
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")

    logging.disable(logging.INFO)
    dbos = DBOS(config={"name": "bench_steps", "system_database_url": f"sqlite:///{db_path}",
                        "log_level": "WARNING"})

    @DBOS.step()
    def noop(i: int) -> int:
        return i

    @DBOS.workflow()
    def four_steps(n: int) -> int:
        total = 0
        for i in range(4):
            total += noop(i)
        return total + n

    DBOS.launch()
    try:
        four_steps(-1)  # warm-up (not timed): imports, statement caches
        start = time.perf_counter()
        for n in range(args.runs):
            four_steps(n)
        elapsed = time.perf_counter() - start
        with sqlite3.connect(db_path) as conn:
            steps = conn.execute("SELECT count(*) FROM operation_outputs").fetchone()[0]
            workflows = conn.execute("SELECT count(*) FROM workflow_status WHERE status = 'SUCCESS'").fetchone()[0]
        engine = dbos._sys_db.engine  # the pragmas DBOS's own connections run with
        with engine.connect() as conn:
            journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
            synchronous = conn.exec_driver_sql("PRAGMA synchronous").scalar()
    finally:
        DBOS.destroy()
    from importlib.metadata import version

    import dbos as dbos_pkg

    print(json.dumps({"seconds": elapsed, "runs": args.runs, "steps_recorded": steps - 4,
                      "workflows_success": workflows - 1, "journal_mode": journal, "synchronous": synchronous,
                      "dbos_version": version("dbos"), "python": sys.version.split()[0],
                      "module": dbos_pkg.__file__}))


if __name__ == "__main__":
    main()
