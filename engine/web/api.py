"""``/api/``: the CLI's ``--json`` shapes (``engine.read.views``), read-only.

``/api/runs`` takes the runs page's filters and is keyset-paged: a
``Link: <…>; rel="next"`` header carries the next page. Every string in an
answer is inert (``redact.neutralise``, line breaks kept): commit subjects,
actors and server errors come from outside, and a client that shows them
must not be handed an escape sequence or a bidi override.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.core import errors, inputs, limits, redact
from engine.read import run_queries, schedule_queries, views
from engine.web.pages import state_of
from engine.web.params import run_filter


class InertJSON(JSONResponse):
    """A JSON answer whose strings carry no control or bidi character."""

    def render(self, content: Any) -> bytes:
        """``content`` as JSON, every string (keys included) neutralised first."""
        return super().render(inert(content))


def inert(value: Any) -> Any:
    """``value`` with every string in it neutralised (``redact.neutralise``, line breaks kept)."""
    if isinstance(value, str):
        return redact.neutralise(value, keep_newlines=True)
    if isinstance(value, dict):
        return {inert(k): inert(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [inert(v) for v in value]
    return value


def api_runs(request: Request) -> Response:
    """``GET /api/runs``: runs by the page's filters, with a cursor."""
    rt = state_of(request).rt
    filt, echo = run_filter(rt, request.query_params)
    limit_text = request.query_params.get("limit", str(limits.RUNS_LIST))
    if not (limit_text.isascii() and limit_text.isdigit() and len(limit_text) <= 4) or not 1 <= int(limit_text) <= limits.API_MAX:
        raise errors.InvalidInput(f"limit '{limit_text[:20]}' must be a number from 1 to {limits.API_MAX}")
    result = run_queries.page_runs(rt, filt, after=request.query_params.get("after") or None, limit=int(limit_text))
    headers = {}
    if result.next_cursor:
        query = [*echo.items(), *(("status", s) for s in filt.statuses), ("limit", limit_text),
                 ("after", result.next_cursor)]
        headers["Link"] = f'</api/runs?{urlencode(query)}>; rel="next"'
    now = rt.clock.now()
    return InertJSON([views.run_summary(r, now) for r in result.runs], headers=headers)


def api_run(request: Request) -> Response:
    """``GET /api/runs/ID``: one run in detail."""
    try:
        run_id = inputs.run_id(str(request.path_params["run_id"]))
    except errors.InvalidInput as exc:
        raise errors.NotFound(exc.message) from None
    rt = state_of(request).rt
    return InertJSON(views.run_detail(run_queries.get_run(rt, run_id), rt.clock.now()))


def api_schedules(request: Request) -> Response:
    """``GET /api/schedules``: every schedule with its last run."""
    overviews = schedule_queries.schedules_overview(state_of(request).rt)
    return InertJSON([views.schedule_view(o.schedule, o.last_run, o.slo, o.maintenance) for o in overviews])


def api_schedule(request: Request) -> Response:
    """``GET /api/schedules/NAME``: one schedule."""
    overview = schedule_queries.schedule_overview(state_of(request).rt, str(request.path_params["name"]))
    return InertJSON(views.schedule_view(overview.schedule, overview.last_run, overview.slo, overview.maintenance))


ROUTES = [
    Route("/api/runs", api_runs),
    Route("/api/runs/{run_id}", api_run),
    Route("/api/schedules", api_schedules),
    Route("/api/schedules/{name}", api_schedule),
]
