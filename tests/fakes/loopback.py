"""The lifecycle every loopback fake shares: its server answered on a thread of its own, then stopped and closed."""

from __future__ import annotations

import socketserver
import threading


def start(server: socketserver.BaseServer, name: str) -> threading.Thread:
    """Serve ``server`` on a daemon thread (polling its stop flag every 50 ms)."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True)
    thread.start()
    return thread


def stop(server: socketserver.BaseServer | None, thread: threading.Thread | None) -> None:
    """Stop serving, close the listening socket (no ResourceWarning), and wait for the thread."""
    if server is not None:
        server.shutdown()
        server.server_close()
    if thread is not None:
        thread.join(timeout=5)
