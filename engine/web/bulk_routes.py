"""The page's bulk actions and manual runs (SPEC §15.5): retry or approve a schedule's runs in one go, "run now"
and "regenerate" on a schedule and on a run.

A bulk action is two requests, as a backfill is: ``GET`` shows its dry run (readable
without the token), and the confirmation form there posts the filters and the ids of
the runs shown; the action acts on those runs only (``bulk_actions.execute(listed=)``).
Every POST goes through the token, the login and CSRF (``routes.authorised_form``),
calls the CLI's own function with actor ``ui:<login>``, and is audited per run.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engine.core import bulk, errors, inputs
from engine.operations import actions, bulk_actions
from engine.runtime import Runtime
from engine.web import params, routes
from engine.web.pages import page, state_of

ACTIONS = {"retry": "Retry", "approve": "Approve"}


def _filters(values: Any, action: str) -> tuple[tuple[Any, ...], Any, Any]:
    """(statuses, first, last) from a query or a form; bad values are InvalidInput (400)."""
    statuses = bulk.parse_statuses(values.getlist("status"), bulk.RETRYABLE) if action == "retry" else ()
    first = params.parse_date(values.get("from"), "from")
    last = params.parse_date(values.get("to"), "to")
    return statuses, first, last


def _plan(rt: Runtime, name: str, action: str, values: Any) -> bulk.BulkPlan:
    statuses, first, last = _filters(values, action)
    if action == "retry":
        return bulk_actions.plan_retry(rt, name, statuses=statuses, first=first, last=last)
    return bulk_actions.plan_approve(rt, name, first=first, last=last)


def _action(request: Request) -> str:
    return "retry" if request.url.path.endswith("/retry") else "approve"


def bulk_preview(request: Request) -> Response:
    """``GET /schedules/NAME/retry`` or ``/approve``: the runs the action would take (its dry run)."""
    rt = state_of(request).rt
    name = str(request.path_params["name"])
    action = _action(request)
    plan = _plan(rt, name, action, request.query_params)
    return page(request, "bulk.html", title=f"{action} {name}", name=name, plan=plan, verb=ACTIONS[action],
                query=request.url.query, selection=bulk.encode_selection(t.run_id for t in plan.targets))


async def bulk_action(request: Request) -> Response:
    """``POST /schedules/NAME/retry`` or ``/approve``: act on the runs the confirmation listed."""
    name = str(request.path_params["name"])
    action = _action(request)

    def act(rt: Runtime, form: Any) -> Any:
        selection = form.get("runs")
        listed = bulk.decode_selection(selection) if isinstance(selection, str) else set()
        listed |= {inputs.run_id(value) for value in form.getlist("run") if isinstance(value, str)}
        if not listed:
            raise errors.InvalidInput("no run was listed: open the preview again")
        plan = _plan(rt, name, action, form)
        done = bulk_actions.execute(rt, plan, listed=listed)
        acted = sum(1 for outcome in done if outcome.action != "skipped")
        skipped = [outcome.message for outcome in done if outcome.action == "skipped"]
        verb = "retried" if action == "retry" else "approved"
        return {"message": f"{verb} {acted} run(s) of {name}"
                           + (f"; skipped {len(skipped)}: {'; '.join(skipped)}" if skipped else "")}
    return await routes.act(request, act, f"/schedules/{name}")


async def schedule_run_now(request: Request) -> Response:
    """``POST /schedules/NAME/run-now`` (``trigger NAME``) or ``/regenerate`` (``trigger NAME --force-new``)."""
    name = str(request.path_params["name"])
    force_new = request.url.path.endswith("/regenerate")
    return await routes.act(request, lambda rt, form: actions.trigger(rt, name, force_new=force_new),
                            f"/schedules/{name}", limiter=(state_of(request).trigger_limiter, "runs asked for"))


async def run_run_now(request: Request) -> Response:
    """``POST /runs/ID/run-now`` (its period by the trigger table) or ``/regenerate`` (a new revision of it)."""
    try:
        run_id = inputs.run_id(str(request.path_params["run_id"]))
    except errors.InvalidInput as exc:
        raise errors.NotFound(exc.message) from None
    force_new = request.url.path.endswith("/regenerate")

    def act(rt: Runtime, form: Any) -> Any:
        result = actions.trigger_period(rt, run_id, force_new=force_new)
        return {"message": result.message, "status": result.status, "run_id": result.run_id}
    return await routes.act(request, act, f"/runs/{run_id}", limiter=(state_of(request).trigger_limiter,
                                                                      "runs asked for"))


ROUTES = [
    Route("/schedules/{name}/retry", bulk_preview, methods=["GET"]),
    Route("/schedules/{name}/retry", bulk_action, methods=["POST"]),
    Route("/schedules/{name}/approve", bulk_preview, methods=["GET"]),
    Route("/schedules/{name}/approve", bulk_action, methods=["POST"]),
    Route("/schedules/{name}/run-now", schedule_run_now, methods=["POST"]),
    Route("/schedules/{name}/regenerate", schedule_run_now, methods=["POST"]),
    Route("/runs/{run_id}/run-now", run_run_now, methods=["POST"]),
    Route("/runs/{run_id}/regenerate", run_run_now, methods=["POST"]),
]
