"""A loopback fake of the Notion API (version 2025-09-03), for the real ``notion_client``.

``FakeNotion`` runs a ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) in a daemon
thread and answers the endpoints the report upload uses, with the JSON shapes
of the real API: databases holding data sources, data source queries, pages,
block children, block deletion. It checks ``Authorization: Bearer <token>``
(401 ``unauthorized`` otherwise) and the ``Notion-Version`` header, and
enforces the request limits the real API enforces (100 children per request,
2,000 characters per rich text content, 100 rich text items per array) with
400 ``validation_error``.

An outage with an end: ``outage(401)`` answers every request so until ``heal()``.
Fault injection, consumed in request order: ``fail_next`` (any status, with
headers such as Retry-After), ``timeout_next`` (answer nothing for longer than
the client waits), ``drop_after_create`` (store the page, then drop the
connection unanswered), ``stale_queries`` (a query index lagging behind).
Ids and created_time values come from a counter, so runs are deterministic.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes import loopback

Json = dict[str, Any]
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_BOT = {"object": "user", "id": "00000000-0000-4000-8000-0000000000b0"}
_ERRORS = {
    400: ("validation_error", "body failed validation"),
    401: ("unauthorized", "API token is invalid."),
    403: ("restricted_resource", "Insufficient permissions for this endpoint."),
    404: ("object_not_found", "Could not find object."),
    409: ("conflict_error", "Conflict occurred while saving. Please try again."),
    429: ("rate_limited", "You have been rate limited. Please try again in a few minutes."),
    500: ("internal_server_error", "Unexpected error occurred."),
    502: ("bad_gateway", "Bad gateway."),
    503: ("service_unavailable", "Notion is unavailable, please try again later."),
    504: ("gateway_timeout", "Gateway timeout."),
}
_BLOCK_TYPES = {"paragraph", "heading_1", "heading_2", "heading_3", "bulleted_list_item",
                "numbered_list_item", "to_do", "quote", "code", "divider", "callout", "toggle"}
_CODE_LANGUAGES = {
    "abap", "arduino", "bash", "basic", "c", "c#", "c++", "clojure", "coffeescript", "css", "dart", "diff",
    "docker", "elixir", "elm", "erlang", "f#", "flow", "fortran", "gherkin", "glsl", "go", "graphql", "groovy",
    "haskell", "html", "java", "javascript", "json", "julia", "kotlin", "latex", "less", "lisp", "livescript",
    "lua", "makefile", "markdown", "markup", "matlab", "mermaid", "nix", "objective-c", "ocaml", "pascal", "perl",
    "php", "plain text", "powershell", "prolog", "protobuf", "python", "r", "reason", "ruby", "rust", "sass",
    "scala", "scheme", "scss", "shell", "sql", "swift", "typescript", "vb.net", "verilog", "vhdl", "visual basic",
    "webassembly", "xml", "yaml",
}


class _Reject(Exception):
    def __init__(self, status: int, message: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message or _ERRORS.get(status, ("", f"HTTP {status}"))[1]


@dataclass
class _Fault:
    kind: str  # "status" or "timeout"
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    path: str | None = None
    message: str | None = None  # the error body's message (default: Notion's own for the status)


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    status: int = 0
    at: float = field(default_factory=time.monotonic)  # arrival (monotonic seconds), for rate checks


def _utf16_len(text: str) -> int:
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _rich(items: list[Json]) -> list[Json]:
    out = []
    for item in items:
        text = item.get("text") or {}
        link = text.get("link")
        annotations = {"bold": False, "italic": False, "strikethrough": False, "underline": False,
                       "code": False, "color": "default", **(item.get("annotations") or {})}
        out.append({"type": "text", "text": {"content": text.get("content", ""), "link": link},
                    "annotations": annotations, "plain_text": text.get("content", ""),
                    "href": link.get("url") if link else None})
    return out


def _check_rich(items: Any, where: str) -> None:
    if not isinstance(items, list):
        raise _Reject(400, f"body failed validation: {where} should be an array.")
    if len(items) > 100:
        raise _Reject(400, f"body failed validation: {where}.length should be ≤ `100`, instead was `{len(items)}`.")
    for i, item in enumerate(items):
        content = (item.get("text") or {}).get("content", "")
        if _utf16_len(content) > 2000:
            raise _Reject(400, f"body failed validation: {where}[{i}].text.content.length should be ≤ "
                               f"`2000`, instead was `{_utf16_len(content)}`.")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeNotion


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _any(self) -> None:
        self.server.fake._serve(self, self.command)

    do_GET = do_POST = do_PATCH = do_DELETE = _any


class FakeNotion:
    """The fake server; use as a context manager. State is guarded by ``lock``."""

    def __init__(self, token: str = "secret_fake_token", *, extra_schema: dict[str, str] | None = None) -> None:
        self.token = token
        self.lock = threading.RLock()
        self.requests: list[Recorded] = []
        self.pages: dict[str, Json] = {}
        self.blocks: dict[str, Json] = {}
        self.children: dict[str, list[str]] = {}
        self._counter = 0
        self._faults: list[_Fault] = []
        self._drops = 0
        self._stale = 0
        self._outage: int | None = None  # every request answers this status until heal()
        self._hold_from: int | None = None  # page creations past this many pages wait for release_creates()
        self._released = threading.Event()
        self.held = 0  # creations waiting at the hold now
        self._stopping = threading.Event()
        self.database_id = self._new_id()
        self.data_source_id = self._new_id()
        schema = {"Name": "title", "Report Key": "rich_text", **(extra_schema or {})}
        self.schema: dict[str, Json] = {
            name: {"id": "title" if kind == "title" else f"p{i}", "name": name, "type": kind, kind: {}}
            for i, (name, kind) in enumerate(schema.items())}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------
    def __enter__(self) -> FakeNotion:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = loopback.start(self._server, "fake-notion")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        loopback.stop(self._server, self._thread)

    @property
    def url(self) -> str:
        assert self._server is not None, "use FakeNotion as a context manager"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- fault injection -------------------------------------------------------
    def fail_next(self, n: int, status: int, headers: dict[str, str] | None = None, *, path: str | None = None,
                  message: str | None = None) -> None:
        """The next ``n`` requests (whose path contains ``path``, if given) answer ``status`` (with ``message``)."""
        if headers is None:
            headers = {"Retry-After": "1"} if status in (429, 503) else {}
        with self.lock:
            self._faults.extend(_Fault("status", status=status, headers=headers, path=path, message=message)
                                for _ in range(n))

    def heal(self) -> None:
        """Drop every pending injected fault and end an ``outage``: the server has recovered."""
        with self.lock:
            self._faults.clear()
            self._outage = None

    def outage(self, status: int) -> None:
        """Answer every request with ``status`` (401: the token is refused) until ``heal``."""
        with self.lock:
            self._outage = status

    def timeout_next(self, n: int = 1, delay_s: float = 5.0, *, path: str | None = None) -> None:
        """The next ``n`` requests get no answer for ``delay_s``, then the connection closes."""
        with self.lock:
            self._faults.extend(_Fault("timeout", delay_s=delay_s, path=path) for _ in range(n))

    def drop_after_create(self, n: int = 1) -> None:
        """The next ``n`` page creations are stored, then the connection drops unanswered."""
        with self.lock:
            self._drops += n

    def hold_creates_after(self, n: int) -> None:
        """Once ``n`` pages exist, further page creations wait unanswered until ``release_creates``."""
        with self.lock:
            self._hold_from = n
            self._released.clear()

    def release_creates(self) -> None:
        """Let every held and later page creation through."""
        with self.lock:
            self._hold_from = None
        self._released.set()

    def stale_queries(self, n: int = 1) -> None:
        """The next ``n`` data source queries return no results (an index lagging behind)."""
        with self.lock:
            self._stale += n

    # -- inspection and seeding --------------------------------------------------
    def add_page(self, report_key: str, title: str = "seeded", *, in_trash: bool = False) -> Json:
        """Store a page directly, as if another client had made it."""
        with self.lock:
            page = self._make_page({"Name": {"title": [{"text": {"content": title}}]},
                                    "Report Key": {"rich_text": [{"text": {"content": report_key}}]}})
            page["in_trash"] = page["archived"] = in_trash
            return page

    def trash(self, page_id: str) -> None:
        with self.lock:
            self.pages[page_id]["in_trash"] = self.pages[page_id]["archived"] = True

    def live_pages(self, report_key: str | None = None) -> list[Json]:
        with self.lock:
            return [p for p in self.pages.values()
                    if not p["in_trash"] and (report_key is None or self._key_of(p) == report_key)]

    def content(self, page_id: str) -> list[Json]:
        """The live child blocks of a page, in order."""
        with self.lock:
            return [self.blocks[b] for b in self.children.get(page_id, []) if not self.blocks[b]["in_trash"]]

    def requests_matching(self, method: str, pattern: str) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    # -- internals ---------------------------------------------------------------
    def _new_id(self) -> str:
        self._counter += 1
        return f"{self._counter:08x}-0000-4000-8000-{self._counter:012x}"

    def _stamp(self) -> str:
        return (_EPOCH + timedelta(seconds=self._counter)).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    @staticmethod
    def _key_of(page: Json) -> str:
        return "".join(i["plain_text"] for i in page["properties"]["Report Key"]["rich_text"])

    def _lookup(self, table: dict[str, Json], raw_id: str, kind: str) -> Json:
        """The object whose id equals ``raw_id`` (with or without dashes), else 404."""
        compact = raw_id.replace("-", "")
        for key, value in table.items():
            if key.replace("-", "") == compact:
                return value
        raise _Reject(404, f"Could not find {kind} with ID: {raw_id}. Make sure the relevant pages and "
                           "databases are shared with your integration.")

    def _same(self, raw_id: str, known: str, kind: str) -> None:
        if raw_id.replace("-", "") != known.replace("-", ""):
            self._lookup({}, raw_id, kind)

    def _serve(self, handler: _Handler, method: str) -> None:
        arrived_at = time.monotonic()
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        parts = urlsplit(handler.path)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        record = Recorded(method, parts.path, body, at=arrived_at)
        if (method, parts.path) == ("POST", "/v1/pages"):
            self._wait_at_hold()
        with self.lock:
            self.requests.append(record)
            fault = next((f for f in self._faults if f.path is None or f.path in parts.path), None)
            if fault is not None:
                self._faults.remove(fault)
            elif self._outage is not None:
                fault = _Fault("status", status=self._outage)
        if fault is not None and fault.kind == "timeout":
            self._stopping.wait(fault.delay_s)
            handler.close_connection = True
            return
        headers: dict[str, str] = {}
        try:
            if fault is not None:
                headers = fault.headers
                raise _Reject(fault.status, fault.message)
            if handler.headers.get("Authorization") != f"Bearer {self.token}":
                raise _Reject(401)
            if not handler.headers.get("Notion-Version"):
                raise _Reject(400, "Notion-Version header failed validation: Notion-Version header should be defined.")
            with self.lock:  # serialise under the lock: the payload is live state
                payload = self._route(method, parts.path, body, parse_qs(parts.query))
                status, data = 200, None if payload is None else json.dumps(payload).encode()
        except _Reject as rej:
            code = _ERRORS.get(rej.status, ("internal_server_error", ""))[0]
            status, data = rej.status, json.dumps({"object": "error", "status": rej.status, "code": code,
                                                   "message": rej.message}).encode()
        record.status = status
        if data is None:  # drop_after_create
            handler.close_connection = True
            return
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json; charset=utf-8")
            handler.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except OSError:
            handler.close_connection = True

    def _wait_at_hold(self) -> None:
        with self.lock:
            if self._hold_from is None or len(self.pages) < self._hold_from:
                return
            self.held += 1
        try:
            while not self._released.wait(0.05) and not self._stopping.is_set():
                pass
        finally:
            with self.lock:
                self.held -= 1

    def _route(self, method: str, path: str, body: Any, query: dict[str, list[str]]) -> Json | None:
        body = body if isinstance(body, dict) else {}
        match = re.fullmatch(r"/v1/(databases|data_sources|pages|blocks)/([^/]+)(/query|/children)?", path)
        if method == "POST" and path == "/v1/pages":
            return self._create_page(body)
        if not match:
            raise _Reject(400, "Invalid request URL.")
        kind, raw_id, tail = match.groups()
        if (method, kind, tail) == ("GET", "databases", None):
            self._same(raw_id, self.database_id, "database")
            return self._database()
        if kind == "data_sources":
            self._same(raw_id, self.data_source_id, "data_source")
            if (method, tail) == ("GET", None):
                return self._data_source()
            if (method, tail) == ("POST", "/query"):
                return self._query(body)
        if kind == "pages" and tail is None and method in ("GET", "PATCH"):
            page = self._lookup(self.pages, raw_id, "page")
            return self._update_page(page, body) if method == "PATCH" else page
        if kind == "blocks" and tail == "/children" and method in ("GET", "PATCH"):
            parent = self._lookup({**self.pages, **self.blocks}, raw_id, "block")
            if method == "GET":
                size = min(int((query.get("page_size") or ["100"])[0]), 100)
                live = [self.blocks[b] for b in self.children.get(parent["id"], []) if not self.blocks[b]["in_trash"]]
                return self._listing(live, next(iter(query.get("start_cursor") or []), None), size, "block")
            return self._append(parent, body.get("children"))
        if (method, kind, tail) == ("DELETE", "blocks", None):
            target = self._lookup({**self.pages, **self.blocks}, raw_id, "block")
            target["in_trash"] = target["archived"] = True
            target["last_edited_time"] = self._stamp()
            return target
        raise _Reject(400, "Invalid request URL.")

    def _database(self) -> Json:
        return {"object": "database", "id": self.database_id, "title": _rich([{"text": {"content": "Reports"}}]),
                "description": [], "parent": {"type": "workspace", "workspace": True}, "is_inline": False,
                "in_trash": False, "archived": False, "is_locked": False, "created_time": self._stamp(),
                "last_edited_time": self._stamp(), "icon": None, "cover": None, "public_url": None,
                "data_sources": [{"id": self.data_source_id, "name": "Reports"}],
                "url": f"https://www.notion.so/{self.database_id.replace('-', '')}"}

    def _data_source(self) -> Json:
        return {"object": "data_source", "id": self.data_source_id, "properties": self.schema,
                "parent": {"type": "database_id", "database_id": self.database_id},
                "database_parent": {"type": "workspace", "workspace": True},
                "title": _rich([{"text": {"content": "Reports"}}]), "description": [], "is_inline": False,
                "archived": False, "in_trash": False, "created_time": self._stamp(),
                "last_edited_time": self._stamp(), "icon": None, "cover": None}

    def _matches(self, page: Json, flt: Json | None) -> bool:
        if not flt:
            return True
        if "and" in flt:
            return all(self._matches(page, f) for f in flt["and"])
        if "or" in flt:
            return any(self._matches(page, f) for f in flt["or"])
        name = flt.get("property")
        if name not in self.schema:
            raise _Reject(400, f"Could not find property with name or id: {name}")
        kind = self.schema[name]["type"]
        condition = flt.get(kind)
        if not isinstance(condition, dict) or set(condition) != {"equals"}:
            raise _Reject(400, f"body failed validation: filter for {name} should use {kind}.equals.")
        text = "".join(i["plain_text"] for i in page["properties"][name][kind])
        return bool(text == condition["equals"])

    def _query(self, body: Json) -> Json:
        size = min(int(body.get("page_size") or 100), 100)
        if self._stale > 0:
            self._stale -= 1
            return self._listing([], None, size, "page_or_data_source")
        found = [p for p in self.pages.values() if not p["in_trash"] and self._matches(p, body.get("filter"))]
        found.sort(key=lambda p: (p["created_time"], p["id"]), reverse=True)
        return self._listing(found, body.get("start_cursor"), size, "page_or_data_source")

    @staticmethod
    def _listing(items: list[Json], cursor: str | None, size: int, kind: str) -> Json:
        start = next((i for i, item in enumerate(items) if item["id"] == cursor), 0) if cursor else 0
        page = items[start:start + size]
        more = start + size < len(items)
        return {"object": "list", "results": page, "next_cursor": items[start + size]["id"] if more else None,
                "has_more": more, "type": kind, kind: {}}

    def _properties(self, given: Json, current: Json | None = None) -> Json:
        props = dict(current or {name: {"id": spec["id"], "type": spec["type"],
                                        spec["type"]: [] if spec["type"] in ("title", "rich_text") else None}
                                 for name, spec in self.schema.items()})
        for name, value in given.items():
            if name not in self.schema:
                raise _Reject(400, f"{name} is not a property that exists.")
            kind = self.schema[name]["type"]
            if not isinstance(value, dict) or kind not in value:
                raise _Reject(400, f"{name} is expected to be {kind}.")
            if kind in ("title", "rich_text"):
                _check_rich(value[kind], f"body.properties.{name}.{kind}")
                props[name] = {"id": self.schema[name]["id"], "type": kind, kind: _rich(value[kind])}
            else:
                props[name] = {"id": self.schema[name]["id"], "type": kind, kind: value[kind]}
        return props

    def _make_page(self, properties: Json) -> Json:
        page_id = self._new_id()
        props = self._properties(properties)
        slug = re.sub(r"[^A-Za-z0-9]+", "-", "".join(i["plain_text"] for i in props["Name"]["title"])).strip("-")
        page = {"object": "page", "id": page_id, "created_time": self._stamp(), "last_edited_time": self._stamp(),
                "created_by": _BOT, "last_edited_by": _BOT, "cover": None, "icon": None,
                "parent": {"type": "data_source_id", "data_source_id": self.data_source_id,
                           "database_id": self.database_id},
                "archived": False, "in_trash": False, "is_locked": False, "properties": props,
                "url": f"https://www.notion.so/{slug + '-' if slug else ''}{page_id.replace('-', '')}",
                "public_url": None}
        self.pages[page_id] = page
        self.children[page_id] = []
        return page

    def _create_page(self, body: Json) -> Json | None:
        parent = body.get("parent") or {}
        source = parent.get("data_source_id") or parent.get("database_id")
        if not source:
            raise _Reject(400, "body failed validation: body.parent.data_source_id should be defined.")
        if source.replace("-", "") not in (self.data_source_id.replace("-", ""), self.database_id.replace("-", "")):
            self._lookup({}, source, "data_source")
        children = body.get("children") or []
        self._check_children(children)
        page = self._make_page(body.get("properties") or {})
        self._store_children(page, children)
        if self._drops > 0:
            self._drops -= 1
            return None
        return page

    def _update_page(self, page: Json, body: Json) -> Json:
        trash = body.get("in_trash", body.get("archived"))
        if page["in_trash"] and trash is not False and body.get("properties"):
            raise _Reject(400, "Can't edit block that is archived. You must unarchive the block before editing.")
        if "properties" in body:
            page["properties"] = self._properties(body["properties"], page["properties"])
        if trash is not None:
            page["in_trash"] = page["archived"] = bool(trash)
        page["last_edited_time"] = self._stamp()
        return page

    def _check_children(self, children: Any) -> None:
        if not isinstance(children, list):
            raise _Reject(400, "body failed validation: body.children should be an array.")
        if len(children) > 100:
            raise _Reject(400, f"body failed validation: body.children.length should be ≤ `100`, "
                               f"instead was `{len(children)}`.")
        for i, block in enumerate(children):
            kind = block.get("type")
            if kind not in _BLOCK_TYPES or not isinstance(block.get(kind), dict):
                raise _Reject(400, f"body failed validation: body.children[{i}] has an unknown or missing type.")
            if "rich_text" in block[kind]:
                _check_rich(block[kind]["rich_text"], f"body.children[{i}].{kind}.rich_text")
            if kind == "code" and block[kind].get("language") not in _CODE_LANGUAGES:
                raise _Reject(400, f"body failed validation: body.children[{i}].code.language should be "
                                   "a known language.")

    def _store_children(self, parent: Json, children: list[Json]) -> list[Json]:
        parent_ref = ({"type": "page_id", "page_id": parent["id"]} if parent["object"] == "page"
                      else {"type": "block_id", "block_id": parent["id"]})
        stored = []
        for block in children:
            kind = block["type"]
            payload = dict(block[kind])
            if "rich_text" in payload:
                payload["rich_text"] = _rich(payload["rich_text"])
            block_id = self._new_id()
            self.blocks[block_id] = {"object": "block", "id": block_id, "parent": parent_ref,
                                     "created_time": self._stamp(), "last_edited_time": self._stamp(),
                                     "created_by": _BOT, "last_edited_by": _BOT, "has_children": False,
                                     "archived": False, "in_trash": False, "type": kind, kind: payload}
            self.children.setdefault(parent["id"], []).append(block_id)
            stored.append(self.blocks[block_id])
        return stored

    def _append(self, parent: Json, children: Any) -> Json:
        if parent["in_trash"]:
            raise _Reject(400, "Can't edit block that is archived. You must unarchive the block before editing.")
        self._check_children(children)
        stored = self._store_children(parent, children)
        return {"object": "list", "results": stored, "next_cursor": None, "has_more": False,
                "type": "block", "block": {}}
