"""``serve --metrics-port``: the Prometheus exposition behind the page's own guards.

prometheus_client's WSGI app serves ``engine.read.metrics.registry_for``; in front of it,
the ``Host`` check of the page (``app.allowed_hosts``: a web page the operator visits cannot
read it through DNS rebinding) and, when the ``[ui]`` token is set, that token as a bearer
token (Prometheus: ``authorization: {credentials: ...}``). A wrong token counts toward the
page's failed-login limit (per address and in all), so the endpoint is no way around it.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from engine.core import logs
from engine.read import metrics
from engine.runtime import Runtime
from engine.web import app, auth, sessions

log = logging.getLogger(__name__)
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def guarded(rt: Runtime, *, token: str | None, hosts: frozenset[str],
            limiter: sessions.LoginLimiter) -> WsgiApp:
    """The exposition as a WSGI app: 400 for another ``Host``, 401/429 without the token when one is set."""
    exposition = make_wsgi_app(metrics.registry_for(rt))

    def plain(start_response: StartResponse, status: str, text: str,
              extra: list[tuple[str, str]] | None = None) -> list[bytes]:
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store"),
                                *(extra or [])])
        return [text.encode() + b"\n"]

    def serve(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if app.host_name(str(environ.get("HTTP_HOST", ""))) not in hosts:
            return plain(start_response, "400 Bad Request", "400 this page is not served under that host name "
                                                            "([ui] allowed_hosts)")
        if token is not None:
            address = str(environ.get("REMOTE_ADDR") or "unknown")
            now = rt.clock.now()
            wait = limiter.blocked_for(address, now)
            if wait is not None:
                seconds = str(max(1, math.ceil(wait.total_seconds())))
                return plain(start_response, "429 Too Many Requests", "429 too many failed tokens; try again later",
                             [("Retry-After", seconds)])
            scheme, _, credentials = str(environ.get("HTTP_AUTHORIZATION", "")).partition(" ")
            if scheme.lower() != "bearer" or not auth.token_matches(credentials.strip(), token):
                limiter.record_failure(address, now)
                logs.event(log, logging.WARNING, "metrics_auth_failed", client=address)  # never the tried token
                return plain(start_response, "401 Unauthorized", "401 the [ui] token is required as a bearer token",
                             [("WWW-Authenticate", 'Bearer realm="reportflow"')])
        served: Iterable[bytes] = exposition(environ, start_response)
        return served

    return serve


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        return


def start(rt: Runtime, port: int, *, bind: str = "127.0.0.1",
          limiter: sessions.LoginLimiter | None = None) -> WSGIServer:
    """Serve the guarded exposition on ``bind:port`` in a daemon thread; the server (``shutdown`` stops it,
    ``server_close`` closes its socket).

    The ``[ui]`` token is checked as ``reportflow ui`` checks it (too short or too plain: exit 2).
    """
    token = auth.read_token(rt.config.ui.token_env)
    auth.check_token(token, rt.config.ui.token_env)
    application = guarded(rt, token=token, hosts=app.allowed_hosts(bind, rt.config.ui.allowed_hosts),
                          limiter=limiter or sessions.LoginLimiter())
    server = make_server(bind, port, application, ThreadingWSGIServer, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    logs.event(log, logging.INFO, "metrics_listening", port=server.server_address[1])
    return server
