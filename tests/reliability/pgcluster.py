"""A throwaway PostgreSQL cluster a test owns: ``initdb`` into a temporary folder, its own port.

Never the machine's shared server: the cluster lives in a folder of its own
(owned by the ``postgres`` user, since ``initdb`` refuses root), listens on a
free loopback port with its unix socket inside that folder, and is started
and stopped with ``pg_ctl``. ``stop(immediate=True)`` is the crash: no
checkpoint, no goodbye to the clients, recovery from the WAL on the next start.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def find_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` holding ``initdb`` and ``pg_ctl``, else None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        return None
    where = Path(found[-1]).parent
    return where if (where / "pg_ctl").exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One cluster; ``url`` is its ``reportflow`` database (made by ``start``)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="rf-pgcluster-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self.root.chmod(0o755)
        self._pg("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/reportflow"
        self.admin_url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self.running = False

    def _pg(self, tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / tool), *args]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout)[-1500:]}\n{self._log_tail()}")
        return done

    def _log_tail(self) -> str:
        try:
            return "server log: " + self.log.read_text()[-1500:]
        except OSError:
            return ""

    def start(self) -> float:
        """Start and wait until it accepts connections; returns the seconds it took."""
        began = time.monotonic()
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c max_connections=100 -c shared_buffers=32MB")
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "120", "start")
        self.running = True
        return time.monotonic() - began

    def stop(self, *, immediate: bool = False) -> None:
        if not self.running:
            return
        self._pg("pg_ctl", "-D", str(self.data), "-m", "immediate" if immediate else "fast", "-w", "stop")
        self.running = False

    def create_database(self) -> None:
        import sqlalchemy as sa

        engine = sa.create_engine(self.admin_url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(sa.text('CREATE DATABASE "reportflow"'))
        finally:
            engine.dispose()

    def destroy(self) -> None:
        """Always called in teardown: stop (immediately) whatever runs, remove the folder."""
        try:
            if self.running or (self.data / "postmaster.pid").exists():
                self.running = True
                self.stop(immediate=True)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
