"""The app factory: routes, the signed session, templates with autoescape, error mapping.

Errors map like the CLI's exit codes: InvalidInput (exit 2) is 400, a
Conflict (exit 3) is 409, a missing run or schedule on a page is 404.
"""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.core import errors, logs, redact
from engine.runtime import Runtime
from engine.web import api, auth, bulk_routes, pages, routes, sessions
from engine.web.pages import page

log = logging.getLogger(__name__)


def _status_for(exc: errors.ReportflowError, request: Request) -> int:
    if isinstance(exc, errors.NotFound) and request.method == "GET":
        return 404
    return {2: 400, 3: 409}.get(exc.exit_code, 500)


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


async def _engine_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.ReportflowError)
    status = _status_for(exc, request)
    if _wants_json(request):
        return JSONResponse({"error": exc.code, "message": exc.message}, status_code=status)
    return page(request, "error.html", status_code=status, title=f"{status} {exc.code}", message=exc.message)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if _wants_json(request):
        return JSONResponse({"error": str(exc.status_code), "message": exc.detail}, status_code=exc.status_code)
    return page(request, "error.html", status_code=exc.status_code, title=str(exc.status_code), message=exc.detail)


SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]
NO_STORE = (b"cache-control", b"no-store")
_PLAIN = [(b"content-type", b"text/plain; charset=utf-8"), NO_STORE]


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8321`` -> ``[::1]``), lower-cased."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[:value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def allowed_hosts(bound: str, extra: tuple[str, ...]) -> frozenset[str]:
    """The ``Host`` names served: the bound address, the loopback names and ``[ui] allowed_hosts``."""
    names = {"localhost", "127.0.0.1", "[::1]", bound.lower(), *(h.lower() for h in extra)}
    return frozenset(f"[{n}]" if ":" in n and not n.startswith("[") else n for n in names)


class Guard:
    """Outermost: the Host check (DNS rebinding gets 400), the security headers on every answer
    (error pages included), ``Cache-Control: no-store`` on everything but ``/static/`` (pages and
    ``/api/`` carry runs, reports and the CSRF token: no browser or proxy cache keeps them),
    ``Secure`` on the cookie over HTTPS, and a plain 500 for any bug."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str], secure_cookies: bool) -> None:
        self.app, self.hosts, self.secure_cookies = app, hosts, secure_cookies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        secure = self.secure_cookies or scope.get("scheme") == "https"
        cacheable = str(scope.get("path", "")).startswith("/static/")

        async def with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [(k, v + b"; secure" if secure and k == b"set-cookie" and b"secure" not in v.lower() else v)
                           for k, v in message.get("headers", [])]
                if not cacheable and all(k.lower() != b"cache-control" for k, _ in headers):
                    headers.append(NO_STORE)
                message["headers"] = [*headers, *SECURITY_HEADERS]
            await send(message)

        host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
        if host_name(host) not in self.hosts:
            await self._plain(with_headers, 400, "400 this page is not served under that host name ([ui] allowed_hosts)")
            return
        try:
            await self.app(scope, receive, with_headers)
        except Exception:
            logs.event(log, logging.ERROR, "ui_failed", path=redact.neutralise(str(scope.get("path", ""))[:200]),
                       exc_info=True)
            if started:
                raise
            await self._plain(with_headers, 500, "500 the page failed; the ui log has the details")

    @staticmethod
    async def _plain(send: Send, status: int, text: str) -> None:
        await send({"type": "http.response.start", "status": status, "headers": list(_PLAIN)})
        await send({"type": "http.response.body", "body": text.encode() + b"\n"})


def create_app(rt: Runtime, *, token: str | None, host: str = "127.0.0.1") -> Starlette:
    """The ASGI app over ``rt`` bound at ``host``; ``token`` None makes it read-only."""
    ui = rt.config.ui
    app = Starlette(
        routes=[*routes.ROUTES, *bulk_routes.ROUTES, *api.ROUTES, Mount("/static", StaticFiles(directory=pages.HERE / "static"), name="static"),
                Route("/favicon.ico", lambda request: Response(status_code=204))],
        middleware=[Middleware(Guard, hosts=allowed_hosts(host, ui.allowed_hosts), secure_cookies=ui.secure_cookies),
                    Middleware(SessionMiddleware, secret_key=auth.session_secret(),
                               session_cookie=pages.SESSION_COOKIE, same_site="strict", https_only=ui.secure_cookies,
                               max_age=int(ui.session_ttl.total_seconds()))],
        exception_handlers={errors.ReportflowError: _engine_error, HTTPException: _http_error},
    )
    app.router.redirect_slashes = False  # its redirect would echo the request's Host
    app.state.web = pages.WebState(rt, token, sessions.SessionStore(ui.session_ttl))
    app.state.templates = pages.templates()
    return app
