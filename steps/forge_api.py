"""A bounded REST client of a forge (GitHub, GitLab, Gitea/Forgejo): where it is, how it is asked, what it answers.

- Where: ``ForgeTarget`` (kind, API base, repository path), told by the configuration or derived from the web
  address of ``origin`` (``steps.forge_links``): ``github.com`` is asked at ``api.github.com``, another GitHub
  host at ``/api/v3``, GitLab at ``/api/v4``, Gitea and Forgejo at ``/api/v1``.
- Bounded: every request ends within its deadline and every answer holds at most ``MAX_BYTES``
  (``engine.core.http_deadline``); no redirect is followed, and a next page is followed only on the API's own
  origin, so the token never goes elsewhere.
- Cached: a ``200`` with an ``ETag`` is kept on disk (``steps.forge_cache``) and asked for again with
  ``If-None-Match``; a ``304`` answers from the cache (GitHub does not count it against the rate limit).
- Paced and rate-limited across processes: every request waits for a slot of a limit named for the API and
  the token (``pace``: the engine's ``ctx.pace``, shared by every worker on the store, as Notion's). A rate-limit
  answer (``429``; ``403`` with ``X-RateLimit-Remaining: 0`` or a ``Retry-After``) holds that limit until the
  forge's reset (``X-RateLimit-Reset`` / ``RateLimit-Reset`` against the answer's ``Date``, or
  ``Retry-After``): the hold is one slot whose interval is the wait, so every process's next request waits for
  it too. A reset further than ``MAX_RATE_WAIT_S`` away is not waited for: the view is missing, rate-limited.
- Failures are ``ForgeError``s carrying a ``ForgeMissing`` (the report's one line); 5xx answers and dropped
  connections are tried again a few times within a short budget (``engine.plugins.retrying``); a request that
  ran out its deadline is not (a forge that slow is down for this report), and a reading sends at most
  ``MAX_REQUESTS``, so the forge can hold the step only so long. No message holds the token.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from engine.core import http_deadline
from engine.plugins import retrying
from steps.forge_cache import Cached, EtagCache
from steps.forge_links import ForgeKind as WebKind
from steps.forge_links import kind_of
from steps.forge_model import ForgeKind, ForgeMissing, MissingReason

#: What one answer may hold: a page of 50 GitHub pull requests (each with both repositories) is about 1.5 MB.
MAX_BYTES = 8 * 1024 * 1024
#: Requests of one limit are at least this far apart across every process (GitHub asks for no more than
#: 900 REST points a minute; a report asks a handful).
REQUEST_INTERVAL = timedelta(milliseconds=100)
#: The longest the step waits for rate-limit resets, all requests together; a reset further away leaves the view
#: missing (the engine's shared-limit skew guard, ``pacing.MAX_AHEAD``, is 5 minutes).
MAX_RATE_WAIT_S = 60.0
#: Requests one reading sends at most, tries again included: with each request's deadline, this bounds how long
#: the forge can hold COLLECT_GIT (a reading asks 2 listings and a page of reviews per pull request).
MAX_REQUESTS = 50
#: A rate-limit answer without a reset or a ``Retry-After``: GitHub asks to wait at least a minute.
DEFAULT_RATE_WAIT_S = 60.0
#: Rate-limit answers waited out for one request before it gives up.
RATE_RETRIES = 2
#: Tries of one request over 5xx answers and dropped connections, and their waiting budget.
ATTEMPTS, RETRY_BUDGET_S = 3, 10.0
USER_AGENT = "reportflow"
_WEB_KINDS: dict[WebKind, ForgeKind] = {WebKind.GITHUB: "github", WebKind.GITLAB: "gitlab", WebKind.GITEA: "gitea"}
_LINK_NEXT = re.compile(r'<([^>]*)>\s*;[^,]*\brel="?next"?', re.IGNORECASE)


class ForgeError(Exception):
    """A request that failed: ``missing`` is what the report says; ``transient`` ones are tried again."""

    def __init__(self, reason: MissingReason, detail: str = "", *, transient: bool = False) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.missing = ForgeMissing(reason=reason, detail=detail)
        self.transient = transient


class _RateLimited(Exception):
    def __init__(self, wait_s: float, until: str) -> None:
        super().__init__(f"rate limited until {until}")
        self.wait_s, self.until = wait_s, until


@dataclass(frozen=True)
class ForgeTarget:
    """A repository on a forge's REST API: ``api`` without a trailing slash, ``repository`` its path there."""

    kind: ForgeKind
    api: str
    repository: str

    def repo_path(self) -> str:
        """The repository's path under the API: ``/repos/o/r``, or GitLab's ``/projects/o%2Fr``."""
        if self.kind == "gitlab":
            return "/projects/" + urllib.parse.quote(self.repository, safe="")
        return f"/repos/{self.repository}"


def target_of(kind: ForgeKind | None, api: str, repository: str, web: str | None) -> ForgeTarget | None:
    """Where the forge of a project is asked: the configuration's ``kind``, ``api`` and ``repository`` where given,
    else derived from ``web`` (``https://host/owner/repo``, from ``origin``); None when neither tells."""
    parts = urllib.parse.urlsplit(web) if web else None
    seen = kind_of(web)
    kind = kind or (_WEB_KINDS.get(seen) if seen is not None else None)
    path = repository.strip("/") or (parts.path.strip("/") if parts else "")
    if kind is None or not path:
        return None
    if not api:
        if parts is None or not parts.hostname:  # no origin: only GitHub has one well-known API
            return ForgeTarget(kind, "https://api.github.com", path) if kind == "github" else None
        host = parts.hostname.lower()
        api = {"github": "https://api.github.com" if host in ("github.com", "www.github.com")
               else f"https://{host}/api/v3", "gitlab": f"https://{host}/api/v4",
               "gitea": f"https://{host}/api/v1"}[kind]
    return ForgeTarget(kind, api.rstrip("/"), path)


@dataclass(frozen=True)
class Page:
    """One answer: its JSON, and the URL of the next page when the forge names one."""

    body: Any
    next_url: str | None


def limit_name(api: str, token: str) -> str:
    """The shared rate limit of one token on one API: a digest, never the token."""
    return "forge:" + hashlib.sha256(f"{api}\0{token}".encode()).hexdigest()[:16]


def auth_headers(kind: ForgeKind, token: str) -> dict[str, str]:
    """How each forge takes a token (and GitHub its media type and API version)."""
    if kind == "github":
        return {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28", "User-Agent": USER_AGENT}
    if kind == "gitlab":
        return {"PRIVATE-TOKEN": token, "Accept": "application/json", "User-Agent": USER_AGENT}
    return {"Authorization": f"token {token}", "Accept": "application/json", "User-Agent": USER_AGENT}


def make_http(deadline_s: float) -> httpx.Client:
    """The HTTP client of a forge: each request within ``deadline_s``, each answer within ``MAX_BYTES``."""
    return http_deadline.client(deadline_s, max_bytes=MAX_BYTES, follow_redirects=False)


class ForgeClient:
    """GET requests to one forge's API with one token: paced, cached, bounded, rate limits honoured."""

    def __init__(self, target: ForgeTarget, token: str, *, http: httpx.Client, cache: EtagCache,
                 pace: Callable[[str, timedelta], None], sleep: Callable[[float], object],
                 max_rate_wait_s: float = MAX_RATE_WAIT_S) -> None:
        self.target = target
        self._headers = auth_headers(target.kind, token)
        self._http, self._cache, self._pace, self._sleep = http, cache, pace, sleep
        self._limit = limit_name(target.api, token)
        self._rate_wait_left_s = max_rate_wait_s
        self._origin = _origin(target.api)
        #: Requests sent and answers taken from the cache (a ``304``), for the log line.
        self.sent = self.cached = 0

    def url(self, path: str, params: Mapping[str, str | int] | None = None) -> str:
        """The full URL of ``path`` under the API, its query in the order given (the cache's key)."""
        query = f"?{urllib.parse.urlencode(dict(params))}" if params else ""
        return f"{self.target.api}{path}{query}"

    def get(self, url: str) -> Page:
        """One answer of ``url`` (from the cache on ``304``); ``ForgeError`` when it cannot be had."""
        last = ""
        for _ in range(RATE_RETRIES + 1):
            try:
                return retrying.call(lambda: self._once(url), sleep=self._sleep, budget=RETRY_BUDGET_S,
                                     retryable=lambda exc: isinstance(exc, ForgeError) and exc.transient,
                                     max_attempts=ATTEMPTS, initial_s=1.0, max_wait_s=4.0)
            except _RateLimited as limited:
                if limited.wait_s > self._rate_wait_left_s:
                    raise ForgeError("rate_limited", limited.until) from None
                self._rate_wait_left_s -= limited.wait_s
                self._hold(limited.wait_s)
                last = limited.until
        raise ForgeError("rate_limited", last)

    def pages(self, url: str, *, max_pages: int) -> Iterator[Page]:
        """``url`` and the pages after it, at most ``max_pages``; the last one yielded says whether more follow."""
        for _ in range(max_pages):
            page = self.get(url)
            yield page
            if page.next_url is None:
                return
            url = page.next_url

    def _hold(self, wait_s: float) -> None:
        """Hold the shared limit for ``wait_s``: one slot whose interval is the wait, so the next request of
        every process (this one's included) goes after it."""
        self._pace(self._limit, timedelta(seconds=max(wait_s, REQUEST_INTERVAL.total_seconds())))

    def _once(self, url: str) -> Page:
        if self.sent >= MAX_REQUESTS:
            raise ForgeError("unavailable", f"more than {MAX_REQUESTS} requests")
        self._pace(self._limit, REQUEST_INTERVAL)
        kept = self._cache.get(url)
        headers = dict(self._headers)
        if kept is not None:
            headers["If-None-Match"] = kept.etag
        try:
            self.sent += 1
            answer = self._http.get(url, headers=headers)
        except http_deadline.ResponseTooLarge as exc:
            raise ForgeError("too_large", f"{exc.limit:,} bytes") from None
        except httpx.TimeoutException:
            raise ForgeError("unavailable", "no answer in time") from None
        except httpx.TransportError as exc:
            raise ForgeError("unavailable", type(exc).__name__, transient=True) from None
        status = answer.status_code
        if status == 304 and kept is not None:
            self.cached += 1
            return Page(kept.body, self._next(url, kept.headers))
        limited = _rate_limited(answer)
        if limited is not None:
            raise limited
        if status in (401, 403):
            raise ForgeError("refused", f"HTTP {status}")
        if status == 404:
            raise ForgeError("not_found", f"{self.target.kind} {self.target.repository}")
        if status >= 500:
            raise ForgeError("unavailable", f"HTTP {status}", transient=True)
        if status != 200:
            raise ForgeError("unreadable", f"HTTP {status}")
        try:
            body = json.loads(answer.content)
        except ValueError:
            raise ForgeError("unreadable", "not JSON") from None
        paging = {name: answer.headers[name] for name in ("link", "x-next-page") if name in answer.headers}
        etag = answer.headers.get("etag")
        if etag:
            self._cache.put(url, Cached(etag, paging, body))
        reset = _exhausted(answer)
        if reset is not None and reset.wait_s <= self._rate_wait_left_s:
            self._hold(reset.wait_s)  # the quota is spent: the next request of every process waits for the reset
        return Page(body, self._next(url, paging))

    def _next(self, url: str, headers: Mapping[str, str]) -> str | None:
        """The next page's URL (a ``Link`` header's ``rel="next"``, else GitLab's ``X-Next-Page``), only on the
        API's own origin."""
        link = _LINK_NEXT.search(headers.get("link", ""))
        if link is not None:
            following = link.group(1)
            return following if _origin(following) == self._origin else None
        number = headers.get("x-next-page", "").strip()
        if not number.isdigit():
            return None
        parts = urllib.parse.urlsplit(url)
        query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != "page"] + [("page", number)]
        return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


def _header(answer: httpx.Response, *names: str) -> str | None:
    return next((answer.headers[n] for n in names if n in answer.headers), None)


def _server_now(answer: httpx.Response) -> datetime | None:
    """The forge's own time (its ``Date`` header): a reset is measured against it, not against this node's clock."""
    raw = answer.headers.get("date")
    try:
        return email.utils.parsedate_to_datetime(raw).astimezone(UTC) if raw else None
    except (TypeError, ValueError):
        return None


def _reset_wait(answer: httpx.Response) -> _RateLimited:
    """How long a rate-limited answer asks to wait, and until when (UTC), from its headers."""
    now = _server_now(answer)
    retry_after = _header(answer, "retry-after")
    reset = _header(answer, "x-ratelimit-reset", "ratelimit-reset")
    if reset is not None and reset.strip().isdigit() and now is not None:
        at = datetime.fromtimestamp(int(reset), UTC)
        return _RateLimited(max(0.0, (at - now).total_seconds()) + 1.0, f"{at:%Y-%m-%dT%H:%M:%SZ}")
    if retry_after is not None and retry_after.strip().isdigit():
        wait = float(retry_after)
        until = f"{now + timedelta(seconds=wait):%Y-%m-%dT%H:%M:%SZ}" if now is not None else f"in {int(wait)} s"
        return _RateLimited(wait, until)
    return _RateLimited(DEFAULT_RATE_WAIT_S, f"in {int(DEFAULT_RATE_WAIT_S)} s")


def _rate_limited(answer: httpx.Response) -> _RateLimited | None:
    """A rate-limit answer's wait: ``429``, or ``403`` with no quota left or a ``Retry-After`` (GitHub's primary
    and secondary limits); None for any other answer."""
    remaining = _header(answer, "x-ratelimit-remaining", "ratelimit-remaining")
    if answer.status_code == 429 or (answer.status_code == 403 and (
            (remaining is not None and remaining.strip() == "0") or "retry-after" in answer.headers)):
        return _reset_wait(answer)
    return None


def _exhausted(answer: httpx.Response) -> _RateLimited | None:
    """A good answer that spent the last of the quota: the wait until its reset; None while some is left."""
    remaining = _header(answer, "x-ratelimit-remaining", "ratelimit-remaining")
    if remaining is None or remaining.strip() != "0":
        return None
    return _reset_wait(answer)
