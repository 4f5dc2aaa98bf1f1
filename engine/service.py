"""``reportflow serve``: scheduler, worker and reconciler loops in one process.

The loop is ``tick; sweep (now and then); drain claimable runs; sleep``. It
sleeps until the next due slot or retry, but never longer than the poll
interval (runs queued by other processes) nor 30 s. SIGTERM/SIGINT set
``stop``: the current step finishes, the run is handed back, the process exits 0.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from engine import reconciler, scheduler
from engine.runtime import Runtime
from engine.store import runs as run_rows
from engine.worker_pool import WorkerPool

log = logging.getLogger(__name__)
MAX_SLEEP = timedelta(seconds=30)


def decide_sleep(now: datetime, wakes: list[datetime | None], poll: timedelta) -> float:
    """Seconds to sleep: until the earliest wake-up, capped by the poll interval and 30 s."""
    cap = min(poll, MAX_SLEEP)
    upcoming = [w for w in wakes if w is not None]
    if not upcoming:
        return cap.total_seconds()
    return max(0.0, min(min(upcoming) - now, cap).total_seconds())


def serve(rt: Runtime, *, stop: threading.Event, worker_id: str | None = None,
          metrics_port: int | None = None) -> None:
    worker = WorkerPool(rt, worker_id, stop=stop)  # [worker] concurrency runs at a time
    server = _start_metrics(rt, metrics_port) if metrics_port is not None else None
    sweep_every = max(1.0, rt.config.worker.lease.total_seconds() / 2)
    last_sweep = float("-inf")
    log.info("serve_started worker=%s", worker.worker_id)
    reconciler.reclaim_own(rt, worker.worker_id)
    poll = rt.config.worker.poll_interval
    try:
        while not stop.is_set():
            try:
                report = scheduler.tick(rt)
                if rt.clock.monotonic() - last_sweep >= sweep_every:
                    reconciler.sweep(rt)
                    last_sweep = rt.clock.monotonic()
                worker.beat()
                worker.drain()
                with rt.store.read() as conn:
                    retry_at = run_rows.next_due_at(conn)
                delay = decide_sleep(rt.clock.now(), [report.next_due_at, retry_at], poll)
            except SQLAlchemyError:
                # The database went away (restart, failover): keep the process, try again shortly.
                log.exception("serve_loop_failed: retrying in %ss", poll.total_seconds())
                delay = poll.total_seconds()
            rt.clock.sleep(delay, stop)
    finally:
        worker.close()
        if server is not None:
            server.shutdown()
        log.info("serve_stopped worker=%s", worker.worker_id)


def _start_metrics(rt: Runtime, port: int) -> ThreadingHTTPServer:
    from engine import metrics

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.rstrip("/") not in ("/metrics", ""):
                self.send_error(404)
                return
            body = metrics.exposition(rt).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics_listening port=%s", server.server_address[1])
    return server
