"""A loopback SMTP receiver the test drives: it records every message and plays scripted endings.

Enough of RFC 5321 for a client such as Apprise's ``mailto://`` (``smtplib``): EHLO/HELO, MAIL, RCPT,
DATA, RSET, NOOP, QUIT. After a message's final ``.`` it answers ``250`` unless told otherwise:
``drop_next()`` closes the connection instead (the message was taken, the client never hears so),
``dribble_next(seconds)`` sends the ``250`` line one byte at a time, ``seconds`` apart.
``arrived`` is set each time a message has been read whole.
"""

from __future__ import annotations

import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.fakes import loopback


@dataclass
class Mailbox:
    host: str = "127.0.0.1"
    port: int = 0
    messages: list[bytes] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    _endings: list[tuple[str, float]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def drop_next(self) -> None:
        self._endings.append(("drop", 0.0))

    def dribble_next(self, seconds: float) -> None:
        self._endings.append(("dribble", seconds))

    def url(self, *, to: str = "team@example.com") -> str:
        """An Apprise ``mailto://`` URL that sends here in plain SMTP (no TLS, no login)."""
        return (f"mailto://{self.host}:{self.port}?smtp={self.host}&mode=insecure&from=reportflow@example.com"
                f"&to={to}")

    def _taken(self, message: bytes) -> tuple[str, float]:
        with self._lock:
            self.messages.append(message)
            ending = self._endings.pop(0) if self._endings else ("ok", 0.0)
        self.arrived.set()
        return ending


@contextmanager
def serve() -> Iterator[Mailbox]:
    box = Mailbox()

    class Handler(socketserver.StreamRequestHandler):
        def say(self, line: str) -> None:
            self.wfile.write(line.encode() + b"\r\n")
            self.wfile.flush()

        def handle(self) -> None:
            try:
                self.say("220 fake ESMTP ready")
                while (line := self.rfile.readline()):
                    verb = line.decode(errors="replace").strip().split(" ", 1)[0].upper()
                    if verb in ("EHLO", "HELO"):
                        self.say("250-fake greets you")
                        self.say("250 8BITMIME")
                    elif verb in ("MAIL", "RCPT", "RSET", "NOOP"):
                        self.say("250 OK")
                    elif verb == "DATA":
                        self.say("354 end with <CRLF>.<CRLF>")
                        body = b""
                        while (chunk := self.rfile.readline()) and chunk != b".\r\n":
                            body += chunk
                        ending, seconds = box._taken(body)
                        if ending == "drop":
                            return
                        if ending == "dribble":
                            for byte in b"250 queued\r\n":
                                self.wfile.write(bytes([byte]))
                                self.wfile.flush()
                                time.sleep(seconds)
                            continue
                        self.say("250 queued")
                    elif verb == "QUIT":
                        self.say("221 bye")
                        return
                    else:
                        self.say("502 not implemented")
            except OSError:
                return  # the client went away (a deadline, a test that is over)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    box.port = server.server_address[1]
    thread = loopback.start(server, "fake-smtp")
    try:
        yield box
    finally:
        loopback.stop(server, thread)
