"""The app factory: routes, the signed session, templates with autoescape, error mapping.

Errors map like the CLI's exit codes: InvalidInput (exit 2) is 400, a
Conflict (exit 3) is 409, a missing run or schedule on a page is 404.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.core import errors
from engine.runtime import Runtime
from engine.web import api, auth, pages, routes
from engine.web.pages import page


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


class SecurityHeaders:
    """Defence in depth behind the escaping: no inline script runs, no MIME sniffing, no framing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


def create_app(rt: Runtime, *, token: str | None) -> Starlette:
    """The ASGI app over ``rt``; ``token`` None makes it read-only."""
    app = Starlette(
        routes=[*routes.ROUTES, *api.ROUTES, Mount("/static", StaticFiles(directory=pages.HERE / "static"), name="static"),
                Route("/favicon.ico", lambda request: Response(status_code=204))],
        middleware=[Middleware(SecurityHeaders), Middleware(SessionMiddleware, secret_key=auth.session_secret(token),
                               session_cookie=pages.SESSION_COOKIE, same_site="strict", https_only=False,
                               max_age=12 * 3600)],
        exception_handlers={errors.ReportflowError: _engine_error, HTTPException: _http_error},
    )
    app.state.web = pages.WebState(rt, token)
    app.state.templates = pages.templates()
    return app
