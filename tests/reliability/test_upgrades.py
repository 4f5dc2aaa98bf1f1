"""Upgrades with runs in flight: an old database migrated to head while its runs are mid-workflow.

For every revision before head, ``fixtures/make_db.py`` builds a database as
that release left it (runs in every status, some RUNNING under a dead
worker's lease, some RETRY_PENDING with SUCCESS steps and outputs, some with
a payload version no worker supports). Then the real CLI: ``db upgrade``
while another upgrade holds the lock (refused), ``db upgrade`` (migrates),
``db upgrade`` again (already at head), ``reconcile`` past the lease, two
``work`` processes. The step log of the ``four_steps`` workflow is the
witness: an earlier SUCCESS step must not start again.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text

from engine.store import database
from engine.store.tables import runs, steps
from tests.acceptance import procs
from tests.conftest import PG_ADMIN_URL, _pg_admin, _with_db
from tests.reliability.fixtures import make_db
from tests.support import utc, write_config

pytestmark = pytest.mark.slow

NOW = utc(2026, 6, 1, 12, 0)
OLD_REVISIONS = sorted(r for r in database.KNOWN_REVISIONS if r != database.HEAD_REVISION)


# Every old schema on SQLite. On PostgreSQL the oldest (every migration's SQL runs on the way to head)
# and the newest (the upgrade a user of the last release makes): the dialect's own paths, at half the cost.
# By default the upgrade from the newest old revision on SQLite (what most installs do) and from the oldest
# on PostgreSQL (through every migration); every other revision with --long.
ENDS = {OLD_REVISIONS[0], OLD_REVISIONS[-1]}
CASES = [pytest.param("sqlite", r, id=f"sqlite-{r}", marks=() if r == OLD_REVISIONS[-1] else pytest.mark.long)
         for r in OLD_REVISIONS] + [
    pytest.param("postgres", r, id=f"postgres-{r}",
                 marks=(pytest.mark.postgres,) if r == OLD_REVISIONS[0] else (pytest.mark.postgres, pytest.mark.long))
    for r in sorted(ENDS)]


@pytest.fixture
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database (no schema at all) on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rf.db'}"
        return
    try:
        admin = _pg_admin()
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - no server
        pytest.skip(f"PostgreSQL unreachable: {exc.__class__.__name__}")
    name = f"rf_up_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield _with_db(PG_ADMIN_URL, name)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _revision(url: str) -> str | None:
    engine = database.create_db_engine(url)
    try:
        return database.current_revision(engine)
    finally:
        engine.dispose()


class HeldMigrationLock:
    """Another ``db upgrade`` in progress: the migration lock held by this test process."""

    def __init__(self, url: str) -> None:
        self.engine = database.create_db_engine(url)
        self.path = database.migration_lock_path(self.engine)

    def __enter__(self) -> HeldMigrationLock:
        if self.path is not None:
            self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        else:
            self.conn = self.engine.connect()
            self.conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": database.MIGRATION_LOCK_KEY})
        return self

    def __exit__(self, *exc: object) -> None:
        if self.path is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
        else:
            self.conn.close()
        self.engine.dispose()


@pytest.mark.parametrize(("empty_url", "revision"), CASES, indirect=["empty_url"])
def test_upgrade_with_runs_in_flight_resumes_every_run_from_its_checkpoint(
        empty_url: str, tmp_path: Path, revision: str) -> None:
    fixture = make_db.build(empty_url, revision, now=NOW)
    log = tmp_path / "steps.log"
    config = write_config(tmp_path / "reportflow.toml", db_url=empty_url,
                          sections={"worker": {"lease": "30s", "poll_interval": "0.2s", "max_attempts": 5},
                                    "testflow": {"log": str(log)}})
    clock = procs.Shared(NOW)

    with HeldMigrationLock(empty_url):
        busy = procs.run(tmp_path, config, "db", "upgrade", now=clock.at())
    assert busy.returncode == 3 and "another `reportflow db upgrade`" in busy.stderr, busy.stderr
    assert _revision(empty_url) == revision, "a refused upgrade changed the schema"
    if empty_url.startswith("postgresql"):
        refused = procs.run(tmp_path, config, "work", "--until-idle", now=clock.at())
        assert refused.returncode != 0 and "db upgrade" in refused.stderr, refused.stderr
        assert not log.exists(), "a worker ran steps on a schema it does not know"

    done = procs.run(tmp_path, config, "db", "upgrade", now=clock.at())
    assert done.returncode == 0 and f"{revision} -> {database.HEAD_REVISION}" in done.stdout, done.stderr
    again = procs.run(tmp_path, config, "db", "upgrade", now=clock.at())
    assert again.returncode == 0 and "already at head" in again.stdout, again.stderr

    engine = create_engine(empty_url)
    try:
        with engine.connect() as conn:
            before = {r.id: (r.status, r.attempt_count) for r in conn.execute(select(runs))}
        later = clock.at(300)  # past the 30 s lease the dead worker held
        assert procs.run(tmp_path, config, "reconcile", now=later).returncode == 0
        for round_ in range(2):  # PENDING runs are promoted as the runs before them finish
            workers = [procs.spawn(tmp_path, config, "work", "--until-idle", now=later) for _ in range(2)]
            for w in workers:
                _, err = procs.finish(w, timeout=600)
                assert w.returncode == 0, f"round {round_}: {err[-3000:]}"
        with engine.connect() as conn:
            after = {r.id: r for r in conn.execute(select(runs))}
            outputs = {(r.run_id, r.name): r.output for r in conn.execute(select(steps))}
    finally:
        engine.dispose()

    starts: Counter[tuple[int, str]] = Counter()
    for line in log.read_text().splitlines():
        parts = line.split()
        if parts[0] == "start":
            starts[(int(parts[1]), parts[2])] += 1
    resumable = fixture.ids("RUNNING", "RETRY_PENDING", "QUEUED", "PENDING")
    for run_id in resumable:
        assert after[run_id].status == "SUCCESS", (run_id, after[run_id].status, after[run_id].error_message)
    # The checkpoint held: earlier SUCCESS steps did not start again, and their outputs were passed on.
    for run_id in fixture.ids("RUNNING"):
        assert starts[(run_id, "ONE")] == 0 and starts[(run_id, "TWO")] == 1, (run_id, starts)
        assert outputs[(run_id, "THREE")]["seen"]["ONE"] == "ONE@fixture"
    for run_id in fixture.ids("RETRY_PENDING"):
        assert starts[(run_id, "ONE")] == starts[(run_id, "TWO")] == 0 and starts[(run_id, "THREE")] == 1
        assert outputs[(run_id, "FOUR")]["seen"] == {"ONE": "ONE@fixture", "TWO": "TWO@fixture",
                                                      "THREE": f"THREE@{run_id}"}
    for run_id in fixture.ids("QUEUED", "PENDING"):
        assert [starts[(run_id, s)] for s in make_db.STEPS] == [1, 1, 1, 1], (run_id, starts)
    # A payload no worker supports fails at once, with nothing run in the wrong shape.
    for run_id in fixture.ids("UNSUPPORTED"):
        assert after[run_id].status == "FAILED" and after[run_id].error_code == "PAYLOAD_VERSION_UNSUPPORTED"
        assert not any(starts[(run_id, s)] for s in make_db.STEPS)
    # Finished rows and MANUAL_REQUIRED are untouched.
    for run_id in fixture.ids("SUCCESS", "PARTIAL_SUCCESS", "FAILED", "MISSED", "SKIPPED", "CANCELLED",
                              "MANUAL_REQUIRED"):
        assert (after[run_id].status, after[run_id].attempt_count) == before[run_id]
        assert not any(starts[(run_id, s)] for s in make_db.STEPS)
    assert max(starts.values()) == 1, "a step started twice"
