"""Notion's rules, written once: the client, how a failed request is classified, which data source
a target names, and what its schema must hold.

Used by the upload (``steps.upload_notion``), which adds pacing, fencing and retries on top, and by
the report workflows' ``doctor`` check (``check``) and health probe (``probe``), which turn the same
``StepError`` into a finding or a probe's answer. So a failure reads the
same, and a schema passes or fails the same, wherever it is met. Against Notion API 2025-09-03 (a
database holds data sources; pages live in a data source). No message ever contains the token.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol

import httpx
import notion_client
from notion_client.errors import HTTPResponseError, InvalidPathParameterError, RequestTimeoutError

from engine.core import errors, http_deadline
from engine.core.models import ArtifactRecord
from engine.plugins.contract import Finding, ProbeResult

REPORT_KEY_PROPERTY = "Report Key"
#: Notion allows an average of 3 requests/s per integration; 350 ms apart keeps
#: under it with room for network jitter between the slot and the arrival.
REQUEST_INTERVAL = timedelta(milliseconds=350)
#: What a refused token means for the operator, in every message that says so.
TOKEN_HINT = ("check the token in the environment variable named by notion.token_env, and that the integration "
              "has access to the database (share the database with the integration)")


def rate_limit_name(token: str) -> str:
    """The shared limit's name for an integration: a short digest of its token, never the token."""
    return "notion:" + hashlib.sha256(token.encode()).hexdigest()[:16]


#: The logger a probe's client logs to: silenced, since the probe reports its result itself (a Notion that is
#: down every 5 minutes made 288 identical warnings a day from the client, besides the probe's own record).
_PROBE_LOG = logging.getLogger(f"{__name__}.probe")
_PROBE_LOG.propagate = False


def make_client(token: str, base_url: str = "", timeout_s: float = 30, *, quiet: bool = False) -> notion_client.Client:
    """A Notion client: its own retries are off (callers retry within their budget), logs go to this
    module's logger (``quiet``: nowhere, for a probe), and ``base_url`` may point at a proxy or a test
    server. Each request ends within ``timeout_s`` overall, not only per read (``engine.core.http_deadline``)."""
    options: dict[str, Any] = {"auth": token, "timeout_ms": max(1, int(timeout_s * 1000)), "retry": False,
                               "logger": _PROBE_LOG if quiet else logging.getLogger(f"{__name__}.client"),
                               # the client sets its logger's level from this (the default is WARNING)
                               **({"log_level": logging.CRITICAL + 1} if quiet else {})}
    if base_url:
        options["base_url"] = base_url.rstrip("/")
    return notion_client.Client(client=http_deadline.client(timeout_s, max_bytes=http_deadline.NOTION_MAX_BYTES),
                                **options)


def retry_after(headers: httpx.Headers | None) -> float | None:
    """A ``Retry-After`` in seconds; None when absent or an HTTP-date (without a clock here: back off)."""
    raw = headers.get("retry-after") if headers is not None else None
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 else None


def classify(exc: Exception, what: str, secret: str | None = None) -> errors.StepError:
    """The ``StepError`` for a failed request made while ``what``.

    429 ``NOTION_RATE_LIMITED``; 5xx, 404, 409, timeouts and dropped connections
    ``NOTION_UNAVAILABLE`` (a 404 here is a page or block that vanished under a caller that
    expected it: look again); 401/403 ``NOTION_UNAUTHORIZED``; an id Notion cannot read
    ``CONFIG_INVALID``; an answer over its cap ``RESPONSE_TOO_LARGE``; any other answer
    ``NOTION_INVALID_REQUEST`` with its detail, ``secret`` masked.
    """
    if isinstance(exc, RequestTimeoutError | httpx.TimeoutException):
        return errors.step_error("NOTION_UNAVAILABLE", f"Notion did not answer in time while {what}: check the "
                                 "network or notion.base_url")
    if isinstance(exc, http_deadline.ResponseTooLarge):
        return errors.step_error("RESPONSE_TOO_LARGE", f"Notion's answer while {what}: {exc}; check "
                                 "notion.base_url")
    if isinstance(exc, httpx.TransportError):
        return errors.step_error("NOTION_UNAVAILABLE", f"cannot reach Notion while {what} ({type(exc).__name__}): "
                                 "check the network or notion.base_url")
    if isinstance(exc, InvalidPathParameterError):
        return errors.step_error("CONFIG_INVALID", f"invalid Notion id while {what}: check notion.database_id "
                                 "or notion.data_source_id")
    if not isinstance(exc, HTTPResponseError):
        return errors.step_error("NOTION_INVALID_REQUEST", f"Notion request failed while {what}: "
                                 f"{type(exc).__name__}")
    status = exc.status
    code = getattr(exc.code, "value", exc.code)
    if status == 429:
        return errors.step_error("NOTION_RATE_LIMITED", f"Notion rate limit (HTTP 429) while {what}",
                                 retry_after_s=retry_after(exc.headers))
    if status in (401, 403):
        return errors.step_error("NOTION_UNAUTHORIZED",
                                 f"Notion refused the token while {what} (HTTP {status} {code}): {TOKEN_HINT}")
    if status >= 500 or status in (404, 409):
        return errors.step_error("NOTION_UNAVAILABLE", f"Notion answered HTTP {status} ({code}) while {what}",
                                 retry_after_s=retry_after(exc.headers) if status >= 500 else None)
    detail = str(exc).replace(secret, "***") if secret else str(exc)
    return errors.step_error("NOTION_INVALID_REQUEST",
                             f"Notion rejected the request while {what} (HTTP {status} {code}): {detail[:500]}")


def missing(kind: str, object_id: str) -> errors.StepError:
    """``NOTION_NOT_FOUND`` for a database or data source the integration cannot see."""
    return errors.step_error("NOTION_NOT_FOUND", f"Notion {kind} {object_id} not found: check "
                             f"notion.{kind.replace(' ', '_')}_id and that the database is shared with the integration")


def call(what: str, fn: Callable[..., Any], *, secret: str | None = None,
         not_found: Callable[[], errors.StepError] | None = None, missing_ok: bool = False, **kwargs: Any) -> Any:
    """``fn(**kwargs)``, one request; a 404 returns None if ``missing_ok``, raises ``not_found()`` if given,
    and every other failure raises ``classify``'s ``StepError``."""
    try:
        return fn(**kwargs)
    except HTTPResponseError as exc:
        if exc.status == 404 and missing_ok:
            return None
        if exc.status == 404 and not_found is not None:
            raise not_found() from exc
        raise classify(exc, what, secret) from exc
    except (RequestTimeoutError, httpx.TransportError, InvalidPathParameterError,
            http_deadline.ResponseTooLarge) as exc:
        raise classify(exc, what, secret) from exc


class Request(Protocol):
    """How a caller sends one request (``call``, perhaps paced and retried around it)."""

    def __call__(self, what: str, fn: Callable[..., Any], *,
                 not_found: Callable[[], errors.StepError] | None = ..., **kwargs: Any) -> Any: ...


def data_source_of(request: Request, client: notion_client.Client, database_id: str, data_source_id: str) -> str:
    """The data source pages go to: ``data_source_id``, else the first data source of ``database_id``.

    ``CONFIG_INVALID`` when neither is set, ``NOTION_NOT_FOUND`` for a database that is missing
    or has no data source.
    """
    if data_source_id:
        return data_source_id
    if not database_id:
        raise errors.step_error("CONFIG_INVALID", "notion: set database_id or data_source_id")
    database = request("reading the database", client.databases.retrieve, database_id=database_id,
                       not_found=lambda: missing("database", database_id))
    sources = database.get("data_sources") or []
    if not sources:
        raise errors.step_error("NOTION_NOT_FOUND", f"Notion database {database_id} has no data source: "
                                "add one in Notion")
    return str(sources[0]["id"])


def read_schema(request: Request, client: notion_client.Client, data_source_id: str) -> dict[str, Any]:
    """The data source's properties by name."""
    source = request("reading the data source", client.data_sources.retrieve, data_source_id=data_source_id,
                     not_found=lambda: missing("data source", data_source_id))
    properties: dict[str, Any] = source.get("properties") or {}
    return properties


def schema_problems(data_source_id: str, schema: dict[str, Any]) -> list[str]:
    """What the data source lacks for reports: a ``Report Key`` text property, and a title property
    (the page's title goes there: without one no page can be named, so it is a problem, not a default)."""
    found: list[str] = []
    key_type = (schema.get(REPORT_KEY_PROPERTY) or {}).get("type")
    if key_type != "rich_text":
        found.append(f"data source {data_source_id} needs a text property named '{REPORT_KEY_PROPERTY}' "
                     f"(found {key_type or 'none'}): add it in Notion")
    if title_property(schema) is None:
        found.append(f"data source {data_source_id} has no title property: add one in Notion")
    return found


def title_property(schema: dict[str, Any]) -> str | None:
    """The name of the schema's title property, if it has one."""
    return next((str(name) for name, spec in schema.items()
                 if isinstance(spec, dict) and spec.get("type") == "title"), None)


def checked_title(data_source_id: str, schema: dict[str, Any]) -> str:
    """The title property's name of a schema that has what reports need; ``CONFIG_INVALID`` naming
    everything it lacks otherwise (``schema_problems``)."""
    problems = schema_problems(data_source_id, schema)
    title = title_property(schema)
    if problems or title is None:
        raise errors.step_error("CONFIG_INVALID", "; ".join(problems))
    return title


# --- doctor's check and the healer's probe -------------------------------------------------------

def check(client: notion_client.Client, token: str, pace: Callable[[str, timedelta], None], database_id: str,
          data_source_id: str, pages: Sequence[ArtifactRecord], *, stored: int) -> list[Finding]:
    """``doctor``'s findings: the target reachable with what an upload needs (``schema_problems``), and
    each of ``pages`` (the newest of ``stored`` pages) still live: not in the trash, not 404.

    Each request waits for ``pace(name, REQUEST_INTERVAL)`` (the integration's limit) and fails as an
    upload's would (``classify``).
    """

    def request(what: str, fn: Callable[..., Any], *, not_found: Callable[[], errors.StepError] | None = None,
                **kwargs: Any) -> Any:
        pace(rate_limit_name(token), REQUEST_INTERVAL)
        return call(what, fn, secret=token, not_found=not_found, **kwargs)

    try:
        source_id = data_source_of(request, client, database_id, data_source_id)
        problems = schema_problems(source_id, read_schema(request, client, source_id))
    except errors.StepError as exc:
        return [Finding("notion", exc.message, problem=True)]
    found = [Finding("notion", problem, problem=True) for problem in problems] or [
        Finding("notion", f"data source {source_id} is reachable, with '{REPORT_KEY_PROPERTY}' and a title")]
    return found + _check_pages(request, client, pages, stored)


def _check_pages(request: Request, client: notion_client.Client, pages: Sequence[ArtifactRecord],
                 stored: int) -> list[Finding]:
    found: list[Finding] = []
    for record in pages:
        page_id = record.external_id or record.location
        repair = f"run `reportflow runs retry {record.run_id} --from-step {record.step}`"
        gone = f"run {record.run_id}: Notion page {page_id} no longer exists (404): {repair}"
        try:
            page = request(f"reading page {page_id}", client.pages.retrieve, page_id=page_id,
                           not_found=lambda: errors.step_error("NOTION_NOT_FOUND", gone))
        except errors.StepError as exc:
            found.append(Finding("notion", exc.message, problem=True))
            if exc.code != "NOTION_NOT_FOUND":
                break  # the API itself is failing: one line says so, not one per page
            continue
        if page.get("in_trash") or page.get("archived"):
            found.append(Finding("notion", f"run {record.run_id}: Notion page {page_id} is in the trash: {repair}",
                                 problem=True))
    if pages and not found:
        found.append(Finding("notion", f"{len(pages)} of {stored} stored page(s) checked, all live"))
    return found


def probe(client: notion_client.Client, token: str, database_id: str, data_source_id: str) -> ProbeResult:
    """One authenticated read of the data source (or database), unpaced: the token is set and accepted.

    One request every ``health_every`` is far below the integration's limit, and the probe must not
    wait for the uploads' turns. Its failures read as an upload's (``classify``).
    """
    try:
        if data_source_id:
            call("reading the data source", client.data_sources.retrieve, secret=token,
                 not_found=lambda: missing("data source", data_source_id), data_source_id=data_source_id)
            return ProbeResult(True, f"data source {data_source_id} is readable with the token")
        call("reading the database", client.databases.retrieve, secret=token,
             not_found=lambda: missing("database", database_id), database_id=database_id)
        return ProbeResult(True, f"database {database_id} is readable with the token")
    except errors.StepError as exc:
        return ProbeResult(False, exc.message)
