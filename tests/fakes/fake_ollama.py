"""A loopback fake of the Ollama HTTP API, for the real ``ollama.Client``.

``FakeOllama`` serves ``GET /api/tags``, ``GET /api/version``, ``GET /api/ps``,
``POST /api/show``, ``POST /api/chat`` and ``POST /api/generate`` (non-streaming,
and NDJSON when ``stream`` is true) from a ``ThreadingHTTPServer`` on
127.0.0.1, port 0, in a daemon thread. It records every request, counts
generations (and the most that ran at once, and which process asked when:
``windows``), answers 404 ``{"error": "model
'x' not found"}`` for unknown models, and plays scripted faults::

    with FakeOllama(models={"llama3.1:8b": "sha256:..."}) as fake:
        fake.script("/api/chat", [(500, {"error": "boom"}, 0.0)])  # then normal answers
        client = ollama.Client(host=fake.url)

Canned replies, one per generation, in order (then ``reply`` again)::

    fake.replies(["## Summary ...", '{"name": "web-daily", ...}'])
    fake.formats  # the ``format`` each generation asked for (None, "json" or a JSON schema)

``fake.down = True`` plays a server that is not running (every connection closed unanswered)
until it is set back to False: an outage with its end.

A scripted entry is ``(status, body, delay_s)``: wait ``delay_s``, then answer
``status`` with ``body`` (a dict is sent as JSON, a str as text, ``None``
means the normal answer). Status 0 closes the connection without answering.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

ScriptEntry = tuple[int, "dict[str, Any] | str | None", float]
Reply = Callable[[dict[str, Any]], str]

DEFAULT_MODEL = "llama3.1:8b"
DEFAULT_REPLY = (
    "## Summary\n\nThe team moved the project forward.\n\n"
    "## Changes by area\n\n### src\n\n- Improvements across the code.\n\n"
    "## Notable commits\n\n- The most significant change of the period.\n"
)
_CREATED_AT = "2026-01-01T00:00:00Z"  # fixed, so answers are reproducible
_DETAILS = {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
            "parameter_size": "8.0B", "quantization_level": "Q4_K_M"}


def fake_digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Generation:
    pid: int | None  # the process that sent the request (None if it could not be found)
    start: float
    end: float


def peer_pid(port: int) -> int | None:
    """The process that owns the loopback client socket on ``port`` (Linux ``/proc``), or None."""
    local = f"0100007F:{port:04X}"
    inode = None
    try:
        with open("/proc/net/tcp") as table:
            for line in list(table)[1:]:
                fields = line.split()
                if fields[1] == local:
                    inode = fields[9]
                    break
    except OSError:
        return None
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    with os.scandir("/proc") as processes:  # closed on the early return (an open one is a ResourceWarning)
        for entry in processes:
            if not entry.name.isdigit():
                continue
            try:
                with os.scandir(f"/proc/{entry.name}/fd") as fds:
                    if any(_link(fd.path) == target for fd in fds):
                        return int(entry.name)
            except OSError:  # a process that ended, or one we may not look into
                continue
    return None


def _link(path: str) -> str | None:
    """Where a descriptor points, or None when it was closed while the folder was read (a busy process
    opens and closes descriptors all the time: one closing must not hide the socket of another)."""
    try:
        return os.readlink(path)
    except OSError:
        return None


class FakeOllama:
    """The fake server; also a context manager that starts and stops it."""

    def __init__(self, models: Mapping[str, str] | Iterable[str] = (DEFAULT_MODEL,), *,
                 reply: str | Reply = DEFAULT_REPLY) -> None:
        if isinstance(models, Mapping):
            self.models: dict[str, str] = dict(models)
        else:
            self.models = {name: fake_digest(name) for name in models}
        self._reply = reply
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[ScriptEntry]] = {}
        self._canned: deque[str] = deque()
        self.formats: list[Any] = []
        self.requests: list[RecordedRequest] = []
        self.generations = 0
        self.generation_delay_s = 0.0
        self.active = 0
        self.max_active = 0
        self.windows: list[Generation] = []  # one per generation: which process asked, and when (Unix time)
        # With ``hold_first_generation`` set, the first generation waits (up to a minute) until some other
        # process has looked the model up, that is, until a rival is on its way to the generation.
        self.hold_first_generation = False
        self.rival_looked_up = threading.Event()
        self._lookup_pids: set[int | None] = set()
        self._first_pid: int | None = None
        # ``down``: the server is "not running" (every connection is closed unanswered, as a refused one
        # fails the client); set it back to False and it answers again. The switch of an outage test.
        self.down = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True,
                                        name="fake-ollama")
        self._started = False

    # -- lifecycle -----------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> FakeOllama:
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._started = False
        self._server.server_close()

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- scripting and inspection ----------------------------------------------------

    def script(self, path: str, entries: Iterable[ScriptEntry]) -> None:
        """Queue answers for ``path``; each request takes the next, then normal behaviour."""
        with self._lock:
            self._scripts.setdefault(path, deque()).extend(entries)

    def replies(self, texts: Iterable[str]) -> None:
        """Queue canned answers: each generation takes the next, then ``reply`` again."""
        with self._lock:
            self._canned.extend(texts)

    def _text_for(self, body: dict[str, Any]) -> str:
        with self._lock:
            self.formats.append(body.get("format"))
            if self._canned:
                return self._canned.popleft()
        return self._reply(body) if callable(self._reply) else self._reply

    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def _next_scripted(self, path: str) -> ScriptEntry | None:
        with self._lock:
            queue = self._scripts.get(path)
            return queue.popleft() if queue else None

    def _saw_lookup(self, pid: int | None) -> None:
        with self._lock:
            self._lookup_pids.add(pid)
            if self._first_pid is not None and self._lookup_pids - {self._first_pid}:
                self.rival_looked_up.set()

    def _is_first_generation(self, pid: int | None) -> bool:
        with self._lock:
            if self._first_pid is not None:
                return False
            self._first_pid = pid
            if self._lookup_pids - {pid}:
                self.rival_looked_up.set()
            return True

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # -- the API ---------------------------------------------------------------------

    def _answer(self, method: str, path: str, body: Any) -> tuple[int, Any, bool]:
        """``(status, payload, is_generation)`` for a request that is not scripted."""
        if method == "GET" and path == "/api/tags":
            return 200, {"models": [self._model_entry(n, d) for n, d in self.models.items()]}, False
        if method == "GET" and path == "/api/version":
            return 200, {"version": "0.6.0"}, False
        if method == "GET" and path == "/api/ps":
            return 200, {"models": []}, False
        if method == "POST" and path in ("/api/show", "/api/chat", "/api/generate"):
            name = body.get("model", "") if isinstance(body, dict) else ""
            if name not in self.models:
                return 404, {"error": f"model '{name}' not found"}, False
            if path == "/api/show":
                return 200, self._show(name), False
            text = self._text_for(body)
            done = {"model": name, "created_at": _CREATED_AT, "done": True, "done_reason": "stop",
                    "total_duration": 1_000_000, "load_duration": 1000,
                    "prompt_eval_count": 10, "prompt_eval_duration": 1000,
                    "eval_count": 10, "eval_duration": 1000}
            if path == "/api/chat":
                return 200, {**done, "message": {"role": "assistant", "content": text}}, True
            return 200, {**done, "response": text}, True
        return 404, "404 page not found", False

    def _model_entry(self, name: str, digest: str) -> dict[str, Any]:
        return {"name": name, "model": name, "modified_at": _CREATED_AT, "size": 4_920_753_328,
                "digest": digest, "details": _DETAILS}

    def _show(self, name: str) -> dict[str, Any]:
        return {"license": "", "modelfile": f"FROM {name}\n", "parameters": "stop \"<|eot_id|>\"",
                "template": "{{ .Prompt }}", "details": _DETAILS,
                "model_info": {"general.architecture": "llama"},
                "capabilities": ["completion"], "modified_at": _CREATED_AT}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return None

            def do_GET(self) -> None:  # noqa: N802
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def do_HEAD(self) -> None:  # noqa: N802
                self._serve("HEAD")

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                path = self.path.split("?", 1)[0]
                fake._record(RecordedRequest(method, path, body, dict(self.headers.items())))
                if fake.down:
                    self.close_connection = True
                    self.connection.close()
                    return
                if fake.hold_first_generation and path == "/api/tags":
                    fake._saw_lookup(peer_pid(self.client_address[1]))
                scripted = fake._next_scripted(path)
                if scripted is not None:
                    status, payload, delay_s = scripted
                    if delay_s:
                        time.sleep(delay_s)  # the fault being simulated: a slow server
                    if status == 0:
                        self.close_connection = True
                        self.connection.close()
                        return
                    if payload is not None:
                        self._send(status, payload)
                        return
                self._generate(method, path, body)

            def _generate(self, method: str, path: str, body: Any) -> None:
                status, payload, generation = fake._answer(method, path, body)
                if generation:
                    pid = peer_pid(self.client_address[1])  # while the client's socket is open
                    with fake._lock:
                        fake.active += 1
                        fake.max_active = max(fake.max_active, fake.active)
                    if fake.hold_first_generation and fake._is_first_generation(pid):
                        fake.rival_looked_up.wait(60)
                    started = time.time()
                try:
                    if generation and fake.generation_delay_s:
                        time.sleep(fake.generation_delay_s)  # simulated inference time, while "active"
                finally:
                    if generation:  # counted before answering: a client that has its answer sees the count
                        with fake._lock:
                            fake.active -= 1
                            fake.generations += 1
                            fake.windows.append(Generation(pid, started, time.time()))
                stream = isinstance(body, dict) and body.get("stream", True)
                if generation and stream:
                    self._send_stream(payload)
                else:
                    self._send(status, payload)

            def _send(self, status: int, payload: Any) -> None:
                if isinstance(payload, str):
                    data, kind = payload.encode(), "text/plain; charset=utf-8"
                else:
                    data, kind = json.dumps(payload).encode(), "application/json; charset=utf-8"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _send_stream(self, final: dict[str, Any]) -> None:
                """NDJSON as Ollama streams it: one content chunk, then the done record."""
                chunk = {k: v for k, v in final.items() if k in ("model", "created_at")}
                if "message" in final:
                    parts = [{**chunk, "message": final["message"], "done": False},
                             {**final, "message": {"role": "assistant", "content": ""}}]
                else:
                    parts = [{**chunk, "response": final["response"], "done": False},
                             {**final, "response": ""}]
                data = b"".join(json.dumps(p).encode() + b"\n" for p in parts)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def closed_port() -> int:
    """A loopback port with nothing listening (connections are refused)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
