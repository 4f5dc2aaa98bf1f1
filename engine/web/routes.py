"""HTML pages and the write actions. Reads go through the read model; actions call the
CLI's own functions (``engine.operations.actions``, ``engine.scheduling.definitions``) with actor ``ui``."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from engine.core import alerts, bulk, errors, inputs, limits, logs, revisions
from engine.core.cron import timetable, words
from engine.core.models import ACTIVE_STATUSES, CANCELLABLE_STATUSES, RETRYABLE_STATUSES, RunStatus, RunTrigger
from engine.operations import actions, bulk_actions, drafts
from engine.read import alert_log, audit_groups, calendar_view, run_queries, schedule_queries, views
from engine.runtime import Runtime
from engine.scheduling import definitions, model_time
from engine.store import alert_rows
from engine.web import auth, charts, params, run_report, sessions
from engine.web.pages import page, state_of

LEGEND = (
    ("SUCCESS", "success"), ("PARTIAL_SUCCESS", "partial success"), ("FAILED", "failed"),
    ("RETRY_PENDING", "retry pending"), ("RUNNING", "running / queued"), ("MISSED", "missed"),
    ("SKIPPED", "skipped"), ("MANUAL_REQUIRED", "manual required"), ("CANCELLED", "cancelled"),
    ("TOO_OLD", "too old (audit)"), ("DISABLED", "disabled"), ("BEFORE_SCHEDULE", "before schedule"),
    ("NOT_YET_DUE", "not yet due"), ("AWAITING_TICK", "awaiting tick"), ("PRUNED", "pruned"),
)
log = logging.getLogger(__name__)
# Cell colours: QUEUED and PENDING share the RUNNING colour (all "in flight").
CELL_CLASS = {"QUEUED": "RUNNING", "PENDING": "RUNNING", "NO_ROW": "AWAITING_TICK", "PRUNED": "SKIPPED"}


def _run_id(request: Request) -> int:
    try:
        return inputs.run_id(str(request.path_params["run_id"]))
    except errors.InvalidInput as exc:
        raise errors.NotFound(exc.message) from None


# --- reads ---------------------------------------------------------------------

def home(request: Request) -> Response:
    """``/``: redirects to the schedules page."""
    return RedirectResponse("/schedules", status_code=302)


def _schedule_items(rt: Runtime) -> list[dict[str, Any]]:
    now = rt.clock.now()
    items = []
    for overview in schedule_queries.schedules_overview(rt):
        spec = overview.schedule.spec
        fires = timetable.preview(spec.cron, spec.timezone, now, 3, dst_gap=spec.dst_gap, dst_fold=spec.dst_fold)
        items.append({"view": views.schedule_view(overview.schedule, overview.last_run, overview.slo, overview.maintenance),
                      "words": words.describe(spec.cron), "fires": fires})
    return items


def schedules_page(request: Request) -> Response:
    """``/schedules``: every schedule and its last run, and the draft form (``POST /schedules/draft``)."""
    rt = state_of(request).rt
    return page(request, "schedules.html", title="Schedules", items=_schedule_items(rt), draft=None,
                health=schedule_queries.provider_health(rt),
                draft_text="", draft_error=None, draft_project="", draft_workflow="")


#: The draft form (SPEC §16.2 on the page): what it takes, how long it may take, how often.
DRAFT_TEXT_MAX = 500
DRAFT_DEADLINE_S = 30.0
DRAFT_ECHO_MAX = 300  # characters of an error or a rationale shown back


async def draft_action(request: Request) -> Response:
    """``POST /schedules/draft``: a schedule drafted from words, validated and previewed; nothing written.

    Logged in and CSRF-checked like every action; at most ``sessions.DRAFTS_PER_WINDOW`` per session
    per window (429 after); the model is asked under the host's generation lock without waiting
    for it (busy: said at once) and within ``DRAFT_DEADLINE_S``; what it echoes is cut.
    """
    rt, form = await _authorised_form(request)
    web = state_of(request)
    now = rt.clock.now()
    refused = too_many(request, web.draft_limiter, "drafts")
    if refused is not None:
        return refused
    text = (_field(form, "draft") or "").strip()
    project = (_field(form, "project") or "").strip()[:64] or None
    workflow = (_field(form, "workflow") or "").strip()[:64] or None
    draft, draft_error = None, None
    if len(text) > DRAFT_TEXT_MAX:
        draft_error = f"the sentence is {len(text)} characters long; at most {DRAFT_TEXT_MAX}"
    elif text:
        def ask() -> drafts.DraftReport:
            return drafts.draft(rt.config, rt.registry, text, now=now, project=project, workflow=workflow,
                                slots=partial(rt.store.slot, wait=False), deadline_s=DRAFT_DEADLINE_S,
                                model_time=model_time.reader(rt.store, rt.registry, rt.settings))
        try:
            draft = _cut(await run_in_threadpool(ask))
        except errors.ReportflowError as exc:
            draft_error = _clipped(exc.message)
    return page(request, "schedules.html", title="Schedules", items=_schedule_items(rt), draft=draft,
                health=schedule_queries.provider_health(rt),
                draft_text=text[:DRAFT_TEXT_MAX], draft_error=draft_error, draft_project=project or "",
                draft_workflow=workflow or "")


def _clipped(text: str, limit: int = DRAFT_ECHO_MAX) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


def _cut(report: drafts.DraftReport) -> drafts.DraftReport:
    """The draft as the page shows it: a model's long rationale, error or field is cut, never echoed whole."""
    entry = {key: _clipped(value, 100) if isinstance(value, str) else value for key, value in report.draft.items()}
    return dataclasses.replace(report, draft=entry, rationale=_clipped(report.rationale),
                               errors=[_clipped(problem) for problem in report.errors],
                               toml=_clipped(report.toml, 2000))


def schedule_page(request: Request) -> Response:
    """``/schedules/NAME``: one schedule, its next slots, calendar and start-delay and duration charts."""
    rt = state_of(request).rt
    name = str(request.path_params["name"])
    overview = schedule_queries.schedule_overview(rt, name)
    spec, fires, skipped = schedule_queries.preview(rt, name, 8)
    nav = params.calendar_range(request.query_params, rt.clock.now().astimezone(ZoneInfo(spec.timezone)).date())
    grid = calendar_view.month(rt, name, nav.month) if nav.span == "month" else None
    row = grid.row if grid is not None else calendar_view.calendar(rt, name, weeks=nav.weeks, until=nav.until)
    started = run_queries.chart_runs(rt, name)
    # Only scheduled runs have a start delay (a year-old period backfilled did not start a year late).
    delay = [(r.scheduled_for, r.start_delay.total_seconds(), r.business_key) for r in started
             if r.start_delay is not None]
    duration = [(r.scheduled_for, r.duration.total_seconds(), r.business_key) for r in started
                if r.duration is not None]
    view = views.schedule_view(overview.schedule, overview.last_run, overview.slo, overview.maintenance)
    return page(request, "schedule.html", title=name, view=view,
                words=words.describe(spec.cron), fires=list(zip(fires, skipped, strict=True)), rows=[row], grid=grid, zone=ZoneInfo(spec.timezone), legend_items=LEGEND,
                cell_class=CELL_CLASS,
                delay_chart=charts.series_svg(delay, "start delay"),
                duration_chart=charts.series_svg(duration, "duration"), nav=nav,
                alerts=alert_log.list_notifications(rt, schedule=name, limit=limits.SCHEDULE_ALERTS),
                audit=audit_groups.group_audit(definitions.history(rt, name)[::-1])[:30],
                held=run_queries.held_runs(rt, name), waiting=bulk_actions.waiting_counts(rt, name),
                retry_statuses=[s.value for s in bulk.RETRYABLE], default_retry=[s.value for s in bulk.DEFAULT_RETRY])


def project_calendar_page(request: Request) -> Response:
    """``/projects/PROJECT/calendar``: a project's periods by status."""
    rt = state_of(request).rt
    project = str(request.path_params["project"])
    rows = calendar_view.project_calendar(rt, project)
    return page(request, "project.html", title=f"project {project}", project=project, rows=rows, legend_items=LEGEND,
                cell_class=CELL_CLASS)


def runs_page(request: Request) -> Response:
    """``/runs``: runs by filters, paged."""
    rt = state_of(request).rt
    filt, echo = params.run_filter(rt, request.query_params)
    result = run_queries.page_runs(rt, filt, after=request.query_params.get("after") or None, limit=limits.WEB_PAGE)
    next_url = None
    if result.next_cursor:
        query = [*echo.items(), *(("status", s) for s in filt.statuses), ("after", result.next_cursor)]
        next_url = "/runs?" + urlencode(query)
    return page(request, "runs.html", title="Runs", runs=result.runs, filters=echo, statuses=list(RunStatus),
                chosen=set(filt.statuses), triggers=list(RunTrigger),
                schedule_names=run_queries.schedule_names(rt), next_url=next_url,
                first_page=not request.query_params.get("after"))


def alerts_page(request: Request) -> Response:
    """``/alerts``: every alert across schedules, filtered by severity, schedule and delivery, paged."""
    rt = state_of(request).rt
    filt, before = params.alert_filter(request.query_params)
    found = alert_log.page_alerts(rt, filt, before=before, limit=limits.WEB_PAGE)
    query = [*(("severity", s) for s in filt.severities), *(("schedule", n) for n in [filt.schedule] if n),
             *(("delivery", d) for d in filt.delivery)]
    next_url = "/alerts?" + urlencode([*query, ("before", found.next_before)]) if found.next_before else None
    return page(request, "alerts.html", title="Alerts", found=found, filt=filt, next_url=next_url,
                first_page=before is None, severities=[s.value for s in alerts.Severity],
                delivery_states=alert_rows.DELIVERY_STATES, delivery_of=alert_log.delivery_of)


def run_page(request: Request) -> Response:
    """``/runs/ID``: one run, its steps, attempts and report."""
    rt = state_of(request).rt
    run = run_queries.get_run(rt, _run_id(request))
    detail = views.run_detail(run, rt.clock.now())
    commits: list[dict[str, Any]] = []
    generation: dict[str, Any] = {}
    heads: dict[str, Any] = {}
    for step in run.steps:
        output = step.output or {}
        if isinstance(output.get("commits"), list):
            commits = [c for c in output["commits"] if isinstance(c, dict)]
        if isinstance(output.get("heads"), dict):
            heads = output["heads"]
        if "prompt_sha256" in output or "model" in output:
            generation = {k: output.get(k) for k in ("provider", "model", "model_digest", "prompt_version",
                                                   "prompt_sha256", "trimmed")}
    grounding = views.grounding_of(run)
    if grounding is not None:  # SPEC §16.1: the verdict, and what the model got wrong
        generation["grounding"] = "; ".join([str(grounding["verdict"]),
                                             *map(str, grounding.get("violations", []))])
    try:
        step_names = list(rt.workflow(run.workflow).step_names())
    except errors.ReportflowError:
        step_names = [s.name for s in run.steps]
    zone = ZoneInfo(str(run.pinned.get("timezone", "UTC")))
    notion = [a for a in run.artifacts if a.kind == "notion_page"]
    return page(request, "run.html", title=f"run {run.id}", run=run, detail=detail, zone=zone,
                report=run_report.report_of(rt, run),
                commits=commits, pinned_rows=views.pinned_rows(run.pinned, heads, generation), notion=notion,
                audit=run_queries.run_audit(rt, run.id), step_names=step_names,
                can_retry=run.status in RETRYABLE_STATUSES, can_retry_from=run.status in
                RETRYABLE_STATUSES | {RunStatus.SUCCESS},
                can_approve=run.status is RunStatus.MANUAL_REQUIRED,
                can_run_now=run.schedule_id is not None and revisions.decide_action(
                    revisions.Command.TRIGGER, run.status) in (revisions.PeriodAction.REQUEUE,
                                                               revisions.PeriodAction.APPROVE),
                can_cancel=run.status in CANCELLABLE_STATUSES | {RunStatus.RUNNING, RunStatus.WAITING},
                active=run.status in ACTIVE_STATUSES,
                default_step=views.failed_step(run) or (step_names[0] if step_names else ""))


def backfill_preview(request: Request) -> Response:
    """The dry-run list of a backfill range; the confirm form posts the same range."""
    rt = state_of(request).rt
    name = str(request.path_params["name"])
    first = params.parse_date(request.query_params.get("from"), "from")
    last = params.parse_date(request.query_params.get("to"), "to")
    if first is None or last is None:
        raise errors.InvalidInput("from and to are required (YYYY-MM-DD)")
    report = actions.backfill(rt, name, first=first, last=last, dry_run=True)
    return page(request, "backfill.html", title=f"backfill {name}", name=name, first=first, last=last, report=report)


# --- login -------------------------------------------------------------------------

def _client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def _throttled(request: Request) -> Response | None:
    """The 429 answer while this address has failed too often, else None."""
    web = state_of(request)
    wait = web.limiter.blocked_for(_client_address(request), web.rt.clock.now())
    if wait is None:
        return None
    seconds = max(1, math.ceil(wait.total_seconds()))
    answer = page(request, "error.html", status_code=429, title="429 too many failed logins",
                  message=f"too many failed logins (from this address, or from all of them); "
                          f"try again in {seconds} s")
    answer.headers["Retry-After"] = str(seconds)
    return answer


def login_form(request: Request) -> Response:
    """``GET /login``: the token form (403 when no token is configured)."""
    if state_of(request).token is None:
        raise HTTPException(403, "this page is read-only: no token is configured ([ui] token_env)")
    return _throttled(request) or page(request, "login.html", title="Log in", failed=False,
                                       next_url=_safe_next(request.query_params.get("next")))


def _safe_next(value: str | None) -> str:
    """Only local paths: never an open redirect."""
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/schedules"


async def login(request: Request) -> Response:
    """``POST /login``: log in with the token."""
    web = state_of(request)
    form = await request.form()
    if web.token is None:
        raise HTTPException(403, "this page is read-only: no token is configured ([ui] token_env)")
    throttled = _throttled(request)
    if throttled is not None:
        return throttled
    if not auth.csrf_ok(request.session, _field(form, auth.CSRF_FIELD)):
        raise HTTPException(403, "the form expired or did not come from this page (CSRF); reload and try again")
    next_url = _safe_next(_field(form, "next"))
    now = web.rt.clock.now()
    if not auth.token_matches(_field(form, "token") or "", web.token):
        address = _client_address(request)
        web.limiter.record_failure(address, now)
        logs.event(log, logging.WARNING, "login_failed", client=address)  # never the tried token
        return page(request, "login.html", status_code=403, title="Log in", failed=True, next_url=next_url)
    auth.log_in(request.session, web.session_store, _field(form, "login") or "", now)
    return RedirectResponse(next_url, status_code=303)


async def logout(request: Request) -> Response:
    """``POST /logout``: forget the session."""
    form = await request.form()
    if auth.csrf_ok(request.session, _field(form, auth.CSRF_FIELD)):
        auth.log_out(request.session, state_of(request).session_store)
    return RedirectResponse("/schedules", status_code=303)


# --- actions -----------------------------------------------------------------------

def _field(form: Any, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) else None


async def _authorised_form(request: Request) -> tuple[Runtime, Any]:
    """The form of a write action, after the token, login and CSRF checks (403 otherwise)."""
    web = state_of(request)
    form = await request.form()
    if web.token is None:
        raise HTTPException(403, "this page is read-only: no token is configured ([ui] token_env)")
    session = web.session(request)
    if session is None:
        raise HTTPException(403, "log in first")
    if not auth.csrf_ok(request.session, _field(form, auth.CSRF_FIELD)):
        raise HTTPException(403, "the form expired or did not come from this page (CSRF); reload and try again")
    return dataclasses.replace(web.rt, actor=auth.actor(session)), form


async def _act(request: Request, action: Callable[[Runtime, Any], Any], back: str,
               limiter: tuple[sessions.EventLimiter, str] | None = None) -> Response:
    """Run ``action`` for a logged-in, CSRF-checked request; ``limiter``: at most its count per session (429)."""
    rt, form = await _authorised_form(request)
    if limiter is not None and (refused := too_many(request, *limiter)) is not None:
        return refused
    result = await run_in_threadpool(action, rt, form)
    return page(request, "result.html", title="done", result=result, back=back)


def too_many(request: Request, limiter: sessions.EventLimiter, what: str) -> Response | None:
    """A 429 page when this session used up ``limiter`` (``Retry-After`` set); else the event is counted."""
    now = state_of(request).rt.clock.now()
    session_key = str(request.session.get("sid"))
    wait = limiter.blocked_for(session_key, now)
    if wait is not None:
        seconds = max(1, math.ceil(wait.total_seconds()))
        answer = page(request, "error.html", status_code=429, title=f"429 too many {what}",
                      message=f"too many {what} from this session; try again in {seconds} s")
        answer.headers["Retry-After"] = str(seconds)
        return answer
    limiter.record(session_key, now)
    return None


# Shared with ``bulk_routes`` (the bulk actions, run now and regenerate), which add routes of their own.
act = _act


async def retry_action(request: Request) -> Response:
    """``POST /runs/ID/retry``: retry a run (logged in, CSRF checked)."""
    run_id = _run_id(request)

    def act(rt: Runtime, form: Any) -> Any:
        return actions.retry(rt, run_id, from_step=_field(form, "from_step") or None)
    return await _act(request, act, f"/runs/{run_id}")


async def approve_action(request: Request) -> Response:
    """``POST /runs/ID/approve``: approve a MANUAL_REQUIRED run."""
    run_id = _run_id(request)
    return await _act(request, lambda rt, form: actions.approve(rt, run_id), f"/runs/{run_id}")


async def cancel_action(request: Request) -> Response:
    """``POST /runs/ID/cancel``: cancel a run."""
    run_id = _run_id(request)
    return await _act(request, lambda rt, form: actions.cancel(rt, run_id), f"/runs/{run_id}")


async def enable_action(request: Request) -> Response:
    """``POST /schedules/NAME/enable`` or ``/schedules/NAME/disable`` (with a reason)."""
    name = str(request.path_params["name"])
    enabled = request.url.path.endswith("/enable")

    def act(rt: Runtime, form: Any) -> Any:
        reason = (_field(form, "reason") or "").strip() or None
        if not enabled and reason is None:
            raise errors.InvalidInput("a reason is required to disable a schedule")
        cancel_queued = not enabled and _field(form, "cancel_queued") is not None
        schedule, changed = definitions.set_enabled(rt, name, enabled=enabled, reason=reason,
                                                  cancel_queued=cancel_queued)
        word = "enabled" if enabled else "disabled"
        held = "" if enabled else (" (runs not yet started: cancelled)" if cancel_queued else
                                   " (runs not yet started: held)")
        return {"message": f"schedule {name} {word if changed else 'was already ' + word} "
                           f"(version {schedule.version}){held}"}
    return await _act(request, act, f"/schedules/{name}")


async def backfill_action(request: Request) -> Response:
    """``POST /schedules/NAME/backfill``: backfill a date range."""
    name = str(request.path_params["name"])

    def act(rt: Runtime, form: Any) -> Any:
        first = params.parse_date(_field(form, "from"), "from")
        last = params.parse_date(_field(form, "to"), "to")
        if first is None or last is None:
            raise errors.InvalidInput("from and to are required (YYYY-MM-DD)")
        report = actions.backfill(rt, name, first=first, last=last)
        return {"message": f"backfill {name} {first}..{last}: {len(report.created)} created, "
                           f"{len(report.requeued)} re-queued, {len(report.present)} already present, "
                           f"{len(report.left)} left as they are, {len(report.future)} still in the future"}
    return await _act(request, act, f"/schedules/{name}")



ROUTES = [
    Route("/", home),
    Route("/schedules", schedules_page, methods=["GET"]),
    Route("/schedules/draft", draft_action, methods=["POST"]),
    Route("/schedules/{name}", schedule_page),
    Route("/schedules/{name}/backfill", backfill_preview, methods=["GET"]),
    Route("/schedules/{name}/backfill", backfill_action, methods=["POST"]),
    Route("/schedules/{name}/enable", enable_action, methods=["POST"]),
    Route("/schedules/{name}/disable", enable_action, methods=["POST"]),
    Route("/projects/{project}/calendar", project_calendar_page),
    Route("/runs", runs_page),
    Route("/alerts", alerts_page),
    Route("/runs/{run_id}", run_page),
    Route("/runs/{run_id}/retry", retry_action, methods=["POST"]),
    Route("/runs/{run_id}/approve", approve_action, methods=["POST"]),
    Route("/runs/{run_id}/cancel", cancel_action, methods=["POST"]),
    Route("/login", login_form, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
