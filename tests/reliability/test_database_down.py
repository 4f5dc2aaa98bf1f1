"""PostgreSQL down: every CLI command that needs the database prints one line and exits 1.

(The throwaway-cluster tests with running nodes — backends killed, the cluster
stopped mid-step — are not written yet; see docs/RELIABILITY.md §10.)
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.acceptance import procs
from tests.support import write_config

pytestmark = pytest.mark.slow


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("args", [("tick",), ("work", "--until-idle"), ("reconcile",), ("runs", "list"),
                                  ("db", "upgrade"), ("prune", "--before", "2026-01-01", "--yes"), ("schedules", "apply")])
def test_cli_on_a_database_that_is_down_prints_one_line_and_exits_1(tmp_path: Path, args: tuple[str, ...]) -> None:
    url = f"postgresql+psycopg://reportflow:s3cret-pw@127.0.0.1:{_closed_port()}/reportflow"
    config = write_config(tmp_path / "reportflow.toml", db_url=url)
    done = procs.run(tmp_path, config, *args, now="2026-06-01T00:00:00Z", timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1 and "127.0.0.1" in lines[0], done.stderr[-2000:]
    assert "s3cret-pw" not in done.stderr + done.stdout
