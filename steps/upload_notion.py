"""UPLOAD_NOTION: one live Notion page per report key, through the official client.

Contract (SPEC §6, §10.4, §12), against Notion API 2025-09-03 (a database
holds data sources; pages live in a data source):

- The data source is ``target.data_source_id``, else the first data source of
  ``target.database_id``; a missing database is ``NOTION_NOT_FOUND``; a schema without a
  ``Report Key`` text property or a title property is ``CONFIG_INVALID`` (``steps.notion_api``,
  the rules ``doctor`` checks too).
- One live page per key: a stored page id that is trashed or gone is
  forgotten; the data source is queried on its ``Report Key`` property; a
  found page is updated (properties, and its content replaced); otherwise a
  page is created and the key is queried again: twins made by a crash
  elsewhere are resolved by keeping the oldest (created_time, then id) and
  moving the others to the trash.
- Every request is paced (a ``Pacer``: ``SharedPace``, over the engine's limit
  shared by every worker in a run, over ``LocalLimits`` in ``doctor``; Notion's
  limit is per integration, i.e. per token), fenced
  (``check_fence()`` before each write) and classified by ``notion_api.classify``: 429
  ``NOTION_RATE_LIMITED``, 5xx/timeout/connection ``NOTION_UNAVAILABLE``,
  401/403 ``NOTION_UNAUTHORIZED``. Retryable ones are retried here (the
  engine's in-step retry, ``engine.plugins.retrying``: exponential backoff with
  jitter, Retry-After honoured) for at most ``retry_wait_max_s`` of waiting in
  all; a longer Retry-After is raised with ``retry_after_s`` so the engine can
  set the run's ``not_before``.
- A write whose outcome is unknown (timeout, 5xx, dropped connection on a
  create or an append) is never repeated blindly: the whole lookup-then-write
  sequence runs again, so it finds what the lost request did.
- No message ever contains the token.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, Protocol

import notion_client
from pydantic import BaseModel

from engine.core import errors
from engine.plugins import retrying
from steps import notion_api, notion_blocks

REPORT_KEY_PROPERTY = notion_api.REPORT_KEY_PROPERTY
_MAX_ATTEMPTS = 10
#: Retry waits grow from 0.5 s to 8 s, each plus up to 0.5 s of jitter.
_INITIAL_WAIT_S = 0.5
_MAX_WAIT_S = 8.0

Page = dict[str, Any]

class NotionTarget(BaseModel):
    """Where pages go: a data source, or a database whose first data source is used."""

    database_id: str = ""
    data_source_id: str = ""


class UploadOutput(BaseModel):
    page_id: str
    url: str
    action: Literal["created", "updated"]
    data_source_id: str


class Pacer(Protocol):
    """Paces the upload's requests: ``acquire`` before each one, ``sleep`` between retries."""

    def acquire(self) -> None: ...

    def sleep(self, seconds: float) -> object: ...


@dataclass(frozen=True)
class SharedPace:
    """A ``Pacer`` over a rate limit held elsewhere (the engine's ``pace(name, interval)``: shared by
    every worker on the store, or ``core.pacing.LocalLimits`` in one process): each request waits for a
    slot of ``name``."""

    pace: Callable[[str, timedelta], None]
    name: str
    sleep: Callable[[float], object]
    interval: timedelta = notion_api.REQUEST_INTERVAL

    def acquire(self) -> None:
        self.pace(self.name, self.interval)


class _Calls:
    """Every request of one upload: fencing, pacing, classification and retries."""

    def __init__(self, client: notion_client.Client, pace: Pacer, budget_s: float,
                 check_fence: Callable[[], None]) -> None:
        self.client = client
        self.pace = pace
        self.budget = retrying.RetryBudget(budget_s)  # shared by every request and the whole operation
        self.check_fence = check_fence
        auth = getattr(getattr(client, "options", None), "auth", None)
        self._secret = auth if isinstance(auth, str) and auth else None

    def _retried(self, fn: Callable[[], Any], *, retry_unknown_outcome: bool) -> Any:
        """``fn()``, again after a retryable error (only a 429 unless ``retry_unknown_outcome``),
        within the upload's waiting budget; the waits are the pacer's ``sleep``."""

        def retryable(exc: BaseException) -> bool:
            return (isinstance(exc, errors.StepError) and exc.retryable
                    and (retry_unknown_outcome or exc.code == "NOTION_RATE_LIMITED"))

        return retrying.call(fn, sleep=self.pace.sleep, retryable=retryable, budget=self.budget,
                             max_attempts=_MAX_ATTEMPTS, initial_s=_INITIAL_WAIT_S, max_wait_s=_MAX_WAIT_S)

    def operation(self, fn: Callable[[], Any]) -> Any:
        """Run a whole lookup-then-write sequence, again from the top after a retryable failure."""
        return self._retried(fn, retry_unknown_outcome=True)

    def request(self, what: str, fn: Callable[..., Any], *, write: bool = False, idempotent: bool = True,
                not_found: Callable[[], errors.StepError] | None = None, missing_ok: bool = False,
                **kwargs: Any) -> Any:
        """One API call. ``idempotent=False`` calls are retried here only on 429
        (the server did nothing); other failures go up to ``operation``.
        A 404 raises ``not_found()``, returns None if ``missing_ok``, else is retryable."""

        def once() -> Any:
            if write:
                self.check_fence()
            self.pace.acquire()
            return notion_api.call(what, fn, secret=self._secret, not_found=not_found, missing_ok=missing_ok,
                                   **kwargs)

        return self._retried(once, retry_unknown_outcome=idempotent)


def _page_key(page: Page) -> str:
    prop = (page.get("properties") or {}).get(REPORT_KEY_PROPERTY) or {}
    return "".join(item.get("plain_text") or item.get("text", {}).get("content", "")
                   for item in prop.get("rich_text") or [])


def _is_live(page: Page) -> bool:
    return not (page.get("in_trash") or page.get("archived"))


def _query_key(calls: _Calls, data_source_id: str, report_key: str) -> list[Page]:
    """Live pages of the data source whose Report Key equals ``report_key`` (all result pages)."""
    found: list[Page] = []
    cursor: str | None = None
    while True:
        kwargs: dict[str, Any] = {
            "data_source_id": data_source_id, "page_size": 100,
            "filter": {"property": REPORT_KEY_PROPERTY, "rich_text": {"equals": report_key}},
        }
        if cursor:
            kwargs["start_cursor"] = cursor
        answer = calls.request("looking the report key up", calls.client.data_sources.query,
                               not_found=lambda: notion_api.missing("data source", data_source_id), **kwargs)
        found.extend(page for page in answer.get("results", [])
                     if page.get("object") == "page" and _is_live(page) and _page_key(page) == report_key)
        cursor = answer.get("next_cursor")
        if not answer.get("has_more") or not cursor:
            return found


def _keep_oldest(calls: _Calls, pages: list[Page]) -> Page:
    """Keep the oldest page (created_time, then id); move every other one to the trash."""
    ordered = sorted({page["id"]: page for page in pages}.values(),
                     key=lambda page: (page.get("created_time", ""), page["id"]))
    for twin in ordered[1:]:
        calls.request("trashing a duplicate page", calls.client.pages.update, write=True,
                      missing_ok=True, page_id=twin["id"], in_trash=True)
    return ordered[0]


def _append(calls: _Calls, page_id: str, chunks: list[list[notion_blocks.Block]]) -> None:
    for chunk in chunks:
        calls.request("appending blocks", calls.client.blocks.children.append, write=True,
                      idempotent=False, block_id=page_id, children=chunk)


def _replace(calls: _Calls, page_id: str, properties: dict[str, Any],
             chunks: list[list[notion_blocks.Block]]) -> None:
    """Set the page's properties and replace all of its content with ``chunks``."""
    calls.request("updating the page", calls.client.pages.update, write=True,
                  page_id=page_id, properties=properties)
    old: list[str] = []
    cursor: str | None = None
    while True:
        kwargs: dict[str, Any] = {"block_id": page_id, "page_size": 100}
        if cursor:
            kwargs["start_cursor"] = cursor
        answer = calls.request("listing the page content", calls.client.blocks.children.list, **kwargs)
        old.extend(block["id"] for block in answer.get("results", []))
        cursor = answer.get("next_cursor")
        if not answer.get("has_more") or not cursor:
            break
    for block_id in old:
        calls.request("deleting old content", calls.client.blocks.delete, write=True,
                      missing_ok=True, block_id=block_id)
    _append(calls, page_id, chunks)


def _live_stored_page(calls: _Calls, page_id: str | None, report_key: str, data_source_id: str) -> Page | None:
    """The stored page if it still exists, is live and still belongs to this key and data source."""
    if not page_id:
        return None
    page: Page | None = calls.request("reading the stored page", calls.client.pages.retrieve, missing_ok=True,
                                      page_id=page_id)
    if page is None or not _is_live(page) or _page_key(page) != report_key:
        return None
    parent_source = (page.get("parent") or {}).get("data_source_id")
    if parent_source and parent_source.replace("-", "") != data_source_id.replace("-", ""):
        return None
    return page


def upload(
    client: notion_client.Client,
    target: NotionTarget,
    *,
    report_key: str,
    title: str,
    markdown: str,
    properties_extra: dict[str, Any] | None = None,
    counts: Mapping[str, int] | None = None,
    stored_page_id: str | None = None,
    check_fence: Callable[[], None] = lambda: None,
    pace: Pacer,
    retry_wait_max_s: float = 30.0,
) -> UploadOutput:
    """Create or update the one live page whose ``Report Key`` is ``report_key``.

    The page's title property (named by the data source's schema) is ``title``,
    ``Report Key`` is ``report_key``, ``properties_extra`` (Notion property
    values) are added as given, each of ``counts`` (``Commits``, ``Features``...) goes to the number
    property of that name when the data source has one (and nowhere else), and its content is ``markdown``
    as blocks.
    ``pace`` paces every request; its ``sleep`` (the step's ``ctx.sleep``) is used for
    retry waits too. Raises ``StepError`` (see the module doc) or whatever
    ``check_fence`` raises (``LeaseLost``), before the write it guards.
    """
    if not report_key:
        raise errors.step_error("CONFIG_INVALID", "a Notion upload needs a non-empty report key")
    calls = _Calls(client, pace, retry_wait_max_s, check_fence)
    chunks = notion_blocks.chunk_blocks(notion_blocks.markdown_to_blocks(markdown))
    data_source_id = notion_api.data_source_of(calls.request, client, target.database_id, target.data_source_id)
    schema = notion_api.read_schema(calls.request, client, data_source_id)
    title_name = notion_api.checked_title(data_source_id, schema)
    numbers = {name: {"number": n} for name, n in (counts or {}).items()
               if (schema.get(name) or {}).get("type") == "number"}  # a property the database does not have: left
    properties: dict[str, Any] = {
        **numbers,
        **(properties_extra or {}),  # never overrides the title or the key
        title_name: {"title": notion_blocks.plain_rich_text(title)[:notion_blocks.MAX_RICH_TEXT_ITEMS]},
        REPORT_KEY_PROPERTY: {"rich_text": notion_blocks.plain_rich_text(report_key)},
    }
    stored = _live_stored_page(calls, stored_page_id, report_key, data_source_id)

    def ensure_page() -> tuple[Page, Literal["created", "updated"]]:
        found = _query_key(calls, data_source_id, report_key)
        if stored is not None and all(page["id"] != stored["id"] for page in found):
            found.append(stored)
        if found:
            kept = _keep_oldest(calls, found)
            _replace(calls, kept["id"], properties, chunks)
            return kept, "updated"
        created: Page = calls.request(
            "creating the page", calls.client.pages.create, write=True, idempotent=False,
            parent={"type": "data_source_id", "data_source_id": data_source_id},
            properties=properties, children=chunks[0] if chunks else [])
        _append(calls, created["id"], chunks[1:])
        twins = _query_key(calls, data_source_id, report_key)
        if all(page["id"] != created["id"] for page in twins):
            twins.append(created)  # the query index may lag behind the create
        kept = _keep_oldest(calls, twins)
        if kept["id"] == created["id"]:
            return created, "created"
        _replace(calls, kept["id"], properties, chunks)
        return kept, "updated"

    page, action = calls.operation(ensure_page)
    return UploadOutput(page_id=page["id"], url=page.get("url") or "", action=action,
                        data_source_id=data_source_id)
