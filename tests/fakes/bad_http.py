"""Loopback HTTP servers that misbehave on purpose, on real sockets in daemon threads.

``serve("drip")`` reads each request, then sends its answer one byte every ``every_s``
for ever (``HTTP/1.1 200 OK\\r\\nX-Slow: ...``): a per-read timeout longer than
``every_s`` never trips. ``serve("garbage")`` answers a status line that is no HTTP;
``serve("headers")`` a 200 with 150 headers; ``serve("silent")`` reads the request and
sends nothing; ``serve("flood")`` answers a 200 whose body never ends, as fast as the socket takes it (JSON
that never closes, no length), and ``serve("declared")`` one that declares 2 GB in ``Content-Length``. Each
records the requests it read (``requests``) and sets ``arrived``, and ``sent`` counts the body bytes it sent.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class BadServer:
    mode: str
    every_s: float
    url: str = ""
    requests: list[bytes] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    stopped: threading.Event = field(default_factory=threading.Event)
    sent: int = 0

    def _read_request(self, conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                request = self._read_request(conn)
                self.requests.append(request)
                self.arrived.set()
                if self.mode == "garbage":
                    conn.sendall(b"SMTP READY garbage\r\n\r\n")
                elif self.mode == "headers":
                    headers = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
                    conn.sendall(b"HTTP/1.1 200 OK\r\n" + headers + b"Content-Length: 2\r\n\r\n{}")
                elif self.mode in ("flood", "declared"):
                    length = b"Content-Length: 2147483648\r\n" if self.mode == "declared" else b""
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + length +
                                 b"Connection: close\r\n\r\n{\"models\": [" )
                    block = b'{"name": "x", "pad": "' + b"z" * 65_000 + b'"}, '
                    while not self.stopped.is_set():
                        conn.sendall(block)
                        self.sent += len(block)
                elif self.mode == "drip":
                    answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"z" * 100_000
                    for byte in answer:
                        if self.stopped.wait(self.every_s):
                            return
                        conn.sendall(bytes([byte]))
                else:  # silent
                    self.stopped.wait()
            except OSError:
                return


@contextmanager
def serve(mode: str, *, every_s: float = 3.0) -> Iterator[BadServer]:
    server = BadServer(mode, every_s)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    server.url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"

    def accept() -> None:
        while not server.stopped.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(None)
            threading.Thread(target=server._answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopped.set()
        thread.join(5)
        listener.close()
