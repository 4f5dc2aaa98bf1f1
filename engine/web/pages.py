"""What every page handler shares: the request's state, the templates and ``page`` (render with the session's context)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse

from engine.core import dependencies, healing, redact
from engine.core.clock import format_instant
from engine.read import views
from engine.runtime import Runtime
from engine.web import auth, sessions

HERE = Path(__file__).resolve().parent
SESSION_COOKIE = "reportflow_session"


@dataclass(frozen=True)
class WebState:
    """What every request handler reads: the runtime, the write token (None: read-only), the sessions."""

    rt: Runtime
    token: str | None
    session_store: sessions.SessionStore
    limiter: sessions.LoginLimiter = field(default_factory=sessions.LoginLimiter)
    draft_limiter: sessions.EventLimiter = field(default_factory=lambda: sessions.EventLimiter(
        sessions.DRAFTS_PER_WINDOW, sessions.DRAFT_WINDOW, max_keys=sessions.MAX_SESSIONS))
    trigger_limiter: sessions.EventLimiter = field(default_factory=lambda: sessions.EventLimiter(
        sessions.TRIGGERS_PER_WINDOW, sessions.DRAFT_WINDOW, max_keys=sessions.MAX_SESSIONS))

    def session(self, request: Request) -> sessions.Session | None:
        """The logged-in session of ``request``, or None."""
        return auth.current(request.session, self.session_store, self.token, self.rt.clock.now())


def templates() -> jinja2.Environment:
    """The page's Jinja environment (autoescaped, strict, every printed value inert: ``shown``)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             finalize=shown)
    env.filters["instant"] = _instant
    env.filters["secs"] = views.human_seconds
    env.filters["clip"] = _clip
    env.filters["waits"] = healing.describe_wait  # what a run waits for (SPEC §15.5)
    env.filters["upstream"] = dependencies.waiting_for  # the upstream periods a dependent run waits for (SPEC §18)
    return env


def shown(value: Any) -> Any:
    """A value as a template prints it: text without control or bidi characters (a commit subject,
    an audit actor, a server's error, the rendered report all come from outside); line breaks kept."""
    if isinstance(value, Markup):
        return Markup(redact.neutralise(str(value), keep_newlines=True))
    if isinstance(value, str):
        return redact.neutralise(value, keep_newlines=True)
    return value


def _instant(value: datetime | None) -> str:
    """Instants on the page: UTC, ISO 8601, second precision, ``Z``."""
    return "" if value is None else format_instant(value.replace(microsecond=0)) or ""


def _clip(text: str, limit: int = 20_000) -> str:
    """Long step outputs are cut for the page (the JSON API has them whole)."""
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters in /api/runs/<id>)"


def state_of(request: Request) -> WebState:
    """The ``WebState`` of the app serving ``request``."""
    value = request.app.state.web
    assert isinstance(value, WebState)
    return value


def page(request: Request, template: str, /, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render a template with what every page needs (write mode, login state, CSRF token)."""
    web = state_of(request)
    session = web.session(request)
    env: jinja2.Environment = request.app.state.templates
    body = env.get_template(template).render(
        request=request, can_write=web.token is not None, logged_in=session is not None,
        csrf=auth.csrf_token(request.session), csrf_field=auth.CSRF_FIELD, actor=auth.actor(session), **context)
    return HTMLResponse(body, status_code=status_code)
