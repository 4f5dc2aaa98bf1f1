"""Outbound HTTP with an overall deadline and a size cap: the webhook, Ollama, Notion and the health probes.

A per-read timeout never trips on a server that sends one byte every few seconds, so a
request bounded only by it can last for ever (a cron ``cycle`` stuck behind a webhook, a
step behind a model server). ``DeadlineTransport`` is an httpx transport whose every
request, body included, ends within ``deadline_s``: each socket connect, read and write
gets the smaller of its own timeout and what is left of the request's deadline, so the
request ends with httpx's own ``TimeoutException`` once the deadline has passed. It is
built on httpcore's public interfaces (a ``ConnectionPool`` with a ``network_backend``),
and clients take it as ``transport=`` (``httpx.Client``, ``ollama.Client``; notion-client
takes the ``httpx.Client``).

Every answer's body is also capped (``max_bytes``, one per kind of peer: ``WEBHOOK_MAX_BYTES``,
``NOTION_MAX_BYTES``, ``OLLAMA_MAX_BYTES``): a declared ``Content-Length`` over it is refused unread,
and a body is read chunk by chunk until it passes the cap, then dropped with ``ResponseTooLarge``.
A server answering gigabytes costs a bounded read, never the process's memory.

Not covered: requests that httpx routes through a proxy named by ``HTTP(S)_PROXY``
(httpx mounts its own transport for those).
"""

from __future__ import annotations

import contextvars
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from engine.core import clock

#: What an answer of each kind of peer may hold. The webhook's answer is not read (64 KiB); a Notion page or
#: query answer is a few hundred KiB at most; an Ollama chat answer is the report (a num_predict of tokens).
WEBHOOK_MAX_BYTES = 64 * 1024
NOTION_MAX_BYTES = 16 * 1024 * 1024
OLLAMA_MAX_BYTES = 16 * 1024 * 1024


class ResponseTooLarge(httpx.DecodingError):
    """An answer passed its cap (``max_bytes``): the rest is left unread. Never retried: a server that answers
    too much does so again."""

    def __init__(self, limit: int, seen: int) -> None:
        super().__init__(f"the answer passed {limit:,} bytes ({seen:,} seen); the rest was left unread")
        self.limit, self.seen = limit, seen


# When the request being sent must be done (``clock.REAL.monotonic()``), or None outside one.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("http_deadline", default=None)

# httpcore's errors as httpx's (what httpx's own transport raises, and what callers catch), most specific first.
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout), (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout), (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.ConnectError, httpx.ConnectError), (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError), (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError), (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol), (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.NetworkError, httpx.NetworkError), (httpcore.ProtocolError, httpx.ProtocolError),
)


def _bounded(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the current request's deadline; ``error`` once nothing is left."""
    at = _DEADLINE.get()
    if at is None:
        return timeout
    left = at - clock.REAL.monotonic()
    if left <= 0:
        raise error("the request's overall deadline has passed")
    return left if timeout is None else min(timeout, left)


@contextmanager
def _as_httpx() -> Iterator[None]:
    try:
        yield
    except httpcore.TimeoutException as exc:
        raise next(ours for theirs, ours in _ERRORS if isinstance(exc, theirs))(str(exc)) from exc
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.ProxyError, httpcore.UnsupportedProtocol) as exc:
        raise next(ours for theirs, ours in _ERRORS if isinstance(exc, theirs))(str(exc)) from exc


class _Stream(httpcore.NetworkStream):
    """A connection whose every read and write is cut to the current request's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _bounded(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's own synchronous backend, its streams wrapped in ``_Stream``."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_tcp(host, port, _bounded(timeout, httpcore.ConnectTimeout),
                                               local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, _bounded(timeout, httpcore.ConnectTimeout),
                                                       socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Body(httpx.SyncByteStream):
    """A response body read under its request's deadline, chunk by chunk, up to ``limit`` bytes."""

    def __init__(self, stream: Any, at: float, limit: int) -> None:
        self._stream = stream
        self._at = at
        self._limit = limit

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._stream)
        read = 0
        while True:
            token = _DEADLINE.set(self._at)
            try:
                with _as_httpx():
                    chunk = next(chunks)
            except StopIteration:
                return
            finally:
                _DEADLINE.reset(token)
            read += len(chunk)
            if read > self._limit:
                self.close()
                raise ResponseTooLarge(self._limit, read)
            yield chunk

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class DeadlineTransport(httpx.BaseTransport):
    """An httpx transport whose every request (connect, headers and body) ends within ``deadline_s``, and whose
    every answer holds at most ``max_bytes`` (``ResponseTooLarge``)."""

    def __init__(self, deadline_s: float, *, max_bytes: int, verify: bool = True) -> None:
        self.deadline_s = deadline_s
        self.max_bytes = max_bytes
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(verify=verify),
                                             network_backend=_Backend())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; httpx's ``TimeoutException`` once ``deadline_s`` has passed, whatever the server does."""
        at = clock.REAL.monotonic() + self.deadline_s
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                             target=request.url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions)
        token = _DEADLINE.set(at)
        try:
            with _as_httpx():
                answer = self._pool.handle_request(core)
        finally:
            _DEADLINE.reset(token)
        declared = httpx.Headers(answer.headers).get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > self.max_bytes:
            answer.close()
            raise ResponseTooLarge(self.max_bytes, int(declared))
        return httpx.Response(status_code=answer.status, headers=answer.headers,
                              stream=_Body(answer.stream, at, self.max_bytes), extensions=answer.extensions)

    def close(self) -> None:
        """Close the pooled connections."""
        self._pool.close()


def client(deadline_s: float, *, max_bytes: int, timeout_s: float | None = None, **options: Any) -> httpx.Client:
    """An ``httpx.Client`` whose every request ends within ``deadline_s`` (per read: ``timeout_s``, or the deadline)
    and whose answers hold at most ``max_bytes``."""
    return httpx.Client(transport=DeadlineTransport(deadline_s, max_bytes=max_bytes),
                        timeout=timeout_s if timeout_s is not None else deadline_s, **options)
