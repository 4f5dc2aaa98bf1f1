"""The app factory: routes, the signed session, templates with autoescape, error mapping.

Errors map like the CLI's exit codes: InvalidInput (exit 2) is 400, a
Conflict (exit 3) is 409, a missing run or schedule on a page is 404.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine import errors, views
from engine.clock import format_instant
from engine.runtime import Runtime
from engine.web import auth

HERE = Path(__file__).resolve().parent
SESSION_COOKIE = "reportflow_session"


@dataclass(frozen=True)
class WebState:
    """What every request handler reads: the runtime and the write token (None: read-only)."""

    rt: Runtime
    token: str | None


def templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["instant"] = _instant
    env.filters["secs"] = views.human_seconds
    env.filters["clip"] = _clip
    return env


def _instant(value: datetime | None) -> str:
    """Instants on the page: UTC, ISO 8601, second precision, ``Z``."""
    return "" if value is None else format_instant(value.replace(microsecond=0)) or ""


def _clip(text: str, limit: int = 20_000) -> str:
    """Long step outputs are cut for the page (the JSON API has them whole)."""
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters in /api/runs/<id>)"


def state_of(request: Request) -> WebState:
    value = request.app.state.web
    assert isinstance(value, WebState)
    return value


def page(request: Request, template: str, /, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render a template with what every page needs (write mode, login state, CSRF token)."""
    web = state_of(request)
    session = request.session
    env: jinja2.Environment = request.app.state.templates
    body = env.get_template(template).render(
        request=request, can_write=web.token is not None, logged_in=auth.logged_in(session, web.token),
        csrf=auth.csrf_token(session), csrf_field=auth.CSRF_FIELD, actor=auth.actor(session), **context)
    return HTMLResponse(body, status_code=status_code)


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
    from engine.web import api, routes

    app = Starlette(
        routes=[*routes.ROUTES, *api.ROUTES, Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
                Route("/favicon.ico", lambda request: Response(status_code=204))],
        middleware=[Middleware(SecurityHeaders), Middleware(SessionMiddleware, secret_key=auth.session_secret(token),
                               session_cookie=SESSION_COOKIE, same_site="strict", https_only=False,
                               max_age=12 * 3600)],
        exception_handlers={errors.ReportflowError: _engine_error, HTTPException: _http_error},
    )
    app.state.web = WebState(rt, token)
    app.state.templates = templates()
    return app
