"""A loopback webhook receiver the test drives: it records every POST and plays scripted answers.

``hold_next()`` makes the next POST wait until ``release()`` (so a test can kill
the sender mid-request, having seen the request arrive); ``fail_next(503)``
answers the next POST with that status; ``drop_next()`` reads the next POST whole and
closes the connection without an answer; ``dribble_next(seconds)`` answers it one byte
at a time, ``seconds`` apart.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes import loopback


@dataclass
class Received:
    headers: dict[str, str]
    body: dict[str, Any]
    status: int


@dataclass
class Webhook:
    url: str = ""
    received: list[Received] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    _released: threading.Event = field(default_factory=threading.Event)
    _hold: bool = False
    _fail: list[int] = field(default_factory=list)
    _endings: list[tuple[str, float]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def hold_next(self) -> None:
        self._hold, self._released = True, threading.Event()
        self.arrived.clear()

    def release(self) -> None:
        self._released.set()

    def fail_next(self, status: int) -> None:
        self._fail.append(status)

    def drop_next(self) -> None:
        self._endings.append(("drop", 0.0))

    def dribble_next(self, seconds: float) -> None:
        self._endings.append(("dribble", seconds))

    def _ending(self) -> tuple[str, float]:
        with self._lock:
            return self._endings.pop(0) if self._endings else ("answer", 0.0)

    def _answer(self, headers: dict[str, str], body: dict[str, Any]) -> int:
        with self._lock:
            hold, self._hold = self._hold, False
            status = self._fail.pop(0) if self._fail else 200
            self.received.append(Received(headers, body, status))
        self.arrived.set()
        if hold:
            self._released.wait(120)
        return status


@contextmanager
def serve() -> Iterator[Webhook]:
    hook = Webhook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            status = hook._answer({k.lower(): v for k, v in self.headers.items()}, body)
            ending, seconds = hook._ending()
            if ending == "drop":  # taken, then the connection goes: the sender never hears so
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if ending == "dribble":
                try:
                    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}":
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(seconds)
                except OSError:
                    pass
                self.close_connection = True
                return
            try:
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")
            except OSError:
                pass  # the sender was killed while we held its request

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = loopback.start(server, "fake-webhook")
    try:
        yield hook
    finally:
        hook.release()
        loopback.stop(server, thread)
