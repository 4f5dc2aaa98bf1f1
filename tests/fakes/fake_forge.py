"""A loopback fake of a forge's REST API (GitHub, Gitea/Forgejo or GitLab), for ``steps.forge_api``'s real client.

``FakeForge`` runs a ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) in a daemon thread and answers the endpoints
the forge's view reads, with the shapes of the public API documentation:

- GitHub (API at ``url``): ``GET /repos/{o}/{r}/pulls?state=closed`` (sorted by ``updated``), ``/pulls/{n}/reviews``,
  ``/issues?state=closed&since=`` (pull requests included, with a ``pull_request`` key, as GitHub does);
  ``Authorization: Bearer <token>``; ``X-RateLimit-*`` headers on every answer; ``Link`` pagination.
- Gitea (API at ``url + "/api/v1"``): the same paths, ``limit`` for the page size, ``type=issues``;
  ``Authorization: token <token>``.
- GitLab (API at ``url + "/api/v4"``): ``/projects/{id}/merge_requests?state=merged``, ``/merge_requests/{iid}/approvals``,
  ``/issues?state=closed``; ``PRIVATE-TOKEN``; ``X-Next-Page`` pagination (and no ``Link`` header, so the client's
  reading of ``X-Next-Page`` is what pages).

Every ``200`` carries an ``ETag`` (a digest of its body) and ``If-None-Match`` with it answers ``304``. Pages are at
most ``page_size`` entries, whatever is asked. Faults, consumed in request order: ``rate_limit_next`` (``403`` with
``X-RateLimit-Remaining: 0`` and ``X-RateLimit-Reset``, or ``429`` with ``Retry-After``), ``fail_next`` (any
status). A wrong token is ``401``. Every request is recorded.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from tests.fakes import loopback

Json = dict[str, Any]
Kind = Literal["github", "gitea", "gitlab"]


def _id(name: str) -> int:
    """A stable id for a user name (the fake's answers, and so their ETags, are the same in every process)."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:6], 16)


def _github_time(at: datetime | None) -> str | None:
    return None if at is None else f"{at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def _gitlab_time(at: datetime | None) -> str | None:
    return None if at is None else f"{at.astimezone(UTC):%Y-%m-%dT%H:%M:%S}.000Z"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    status: int = 0


@dataclass
class _Fault:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Json = field(default_factory=dict)


@dataclass
class _Pull:
    number: int
    title: str
    author: str
    updated_at: datetime
    merged_at: datetime | None
    merge_sha: str | None
    labels: list[str]
    body: str
    assigned: list[str]
    reviews: list[tuple[str, str]] = field(default_factory=list)  # (login, state)


@dataclass
class _Issue:
    number: int
    title: str
    author: str
    closed_at: datetime
    updated_at: datetime
    labels: list[str]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeForge


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        fake = self.server.fake  # type: ignore[attr-defined]
        status, headers, body = fake._serve(self.path, {k.lower(): v for k, v in self.headers.items()})
        data = b"" if body is None else body
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FakeForge:
    """One repository (``repository``) on a fake forge of ``kind``; see the module doc."""

    def __init__(self, kind: Kind = "github", *, token: str = "ghp_fake_forge_token", repository: str = "acme/shop",
                 page_size: int = 100) -> None:
        self.kind, self.token, self.repository, self.page_size = kind, token, repository, page_size
        self.pulls: dict[int, _Pull] = {}
        self.issues: dict[int, _Issue] = {}
        self.requests: list[Recorded] = []
        self.remaining = 5000
        #: Where ``Link`` headers point (a hostile forge may name another host): this server when None.
        self.link_base: str | None = None
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FakeForge:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = loopback.start(self._server, "fake-forge")
        return self

    def __exit__(self, *exc: object) -> None:
        loopback.stop(self._server, self._thread)

    @property
    def url(self) -> str:
        assert self._server is not None, "use FakeForge as a context manager"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api(self) -> str:
        """The API base a client is configured with."""
        return self.url + {"github": "", "gitea": "/api/v1", "gitlab": "/api/v4"}[self.kind]

    # --- seeding -------------------------------------------------------------------------------------------------

    def add_pull(self, number: int, title: str, author: str, *, updated_at: datetime, merged_at: datetime | None = None,
                 merge_sha: str | None = None, labels: tuple[str, ...] = (), body: str = "",
                 assigned: tuple[str, ...] = ()) -> None:
        """A closed pull request (merged when ``merged_at`` is given); GitLab lists only merged ones."""
        self.pulls[number] = _Pull(number, title, author, updated_at, merged_at, merge_sha, list(labels), body,
                                   list(assigned))

    def review(self, number: int, login: str, state: str) -> None:
        """A review (GitHub/Gitea state) of pull request ``number``; on GitLab an ``APPROVED`` one is an approval."""
        self.pulls[number].reviews.append((login, state))

    def add_issue(self, number: int, title: str, author: str, *, closed_at: datetime, updated_at: datetime | None = None,
                  labels: tuple[str, ...] = ()) -> None:
        self.issues[number] = _Issue(number, title, author, closed_at, updated_at or closed_at, list(labels))

    def rate_limit_next(self, n: int = 1, *, reset_in_s: int = 30, status: int = 403) -> None:
        """The next ``n`` requests are refused by the rate limit: ``403`` with no quota left and the reset
        ``reset_in_s`` from now (GitHub's primary limit), or ``429`` with ``Retry-After`` (GitLab's)."""
        if status == 429:
            fault = _Fault(429, {"Retry-After": str(reset_in_s), "RateLimit-Remaining": "0",
                                 "RateLimit-Reset": str(int(time.time()) + reset_in_s)}, {"message": "Retry later"})
        else:
            fault = _Fault(403, {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "5000",
                                 "X-RateLimit-Reset": str(int(time.time()) + reset_in_s)},
                           {"message": "API rate limit exceeded for user ID 1.",
                            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"})
        with self._lock:
            self._faults += [fault] * n

    def fail_next(self, n: int, status: int) -> None:
        with self._lock:
            self._faults += [_Fault(status, {}, {"message": f"HTTP {status}"})] * n

    def paths(self) -> list[str]:
        """The paths asked, in order (no query)."""
        return [r.path for r in self.requests]

    # --- serving -------------------------------------------------------------------------------------------------

    def _authorised(self, headers: dict[str, str]) -> bool:
        if self.kind == "gitlab":
            return headers.get("private-token") == self.token
        wanted = f"Bearer {self.token}" if self.kind == "github" else f"token {self.token}"
        return headers.get("authorization") == wanted

    def _serve(self, raw_path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes | None]:
        parts = urlsplit(raw_path)
        query = parse_qs(parts.query)
        record = Recorded("GET", parts.path, query, headers)
        with self._lock:
            self.requests.append(record)
            fault = self._faults.pop(0) if self._faults else None
        if fault is not None:
            record.status = fault.status
            return fault.status, {"Content-Type": "application/json", **fault.headers}, json.dumps(fault.body).encode()
        if not self._authorised(headers):
            record.status = 401
            return 401, {"Content-Type": "application/json"}, b'{"message": "Bad credentials"}'
        found = self._route(parts.path, query)
        if found is None:
            record.status = 404
            return 404, {"Content-Type": "application/json"}, b'{"message": "Not Found"}'
        body, paging = found
        data = json.dumps(body).encode()
        etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
        with self._lock:
            self.remaining = max(0, self.remaining - 1)
            quota = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": str(self.remaining),
                     "X-RateLimit-Reset": str(int(time.time()) + 3600)}
        out = {"Content-Type": "application/json; charset=utf-8", "ETag": etag, **paging}
        if self.kind != "gitlab":
            out.update(quota)
        if headers.get("if-none-match") == etag:
            record.status = 304
            return 304, {"ETag": etag}, None
        record.status = 200
        return 200, out, data

    def _route(self, path: str, query: dict[str, list[str]]) -> tuple[Any, dict[str, str]] | None:
        if self.kind == "gitlab":
            base = "/api/v4/projects/" + quote(self.repository, safe="")
        else:
            base = ("/api/v1" if self.kind == "gitea" else "") + f"/repos/{self.repository}"
        if not path.startswith(base + "/"):
            return None
        rest = path[len(base) + 1:].split("/")
        if self.kind == "gitlab":
            if rest == ["merge_requests"]:
                merged = [p for p in self.pulls.values() if p.merged_at is not None
                          and self._after(p.updated_at, query.get("updated_after"))]
                return self._page(path, query, [self._gitlab_mr(p) for p in self._newest(merged)])
            if len(rest) == 3 and rest[0] == "merge_requests" and rest[2] == "approvals" and rest[1].isdigit():
                pull = self.pulls.get(int(rest[1]))
                return None if pull is None else (self._gitlab_approvals(pull), {})
            if rest == ["issues"]:
                issues = [i for i in self.issues.values() if self._after(i.updated_at, query.get("updated_after"))]
                return self._page(path, query, [self._gitlab_issue(i) for i in self._newest(issues)])
            return None
        if rest == ["pulls"]:
            return self._page(path, query, [self._github_pull(p) for p in self._newest(list(self.pulls.values()))])
        if len(rest) == 3 and rest[0] == "pulls" and rest[2] == "reviews" and rest[1].isdigit():
            pull = self.pulls.get(int(rest[1]))
            return None if pull is None else self._page(path, query, self._github_reviews(pull))
        if rest == ["issues"]:
            entries: list[tuple[datetime, Json]] = [
                (i.updated_at, self._github_issue(i)) for i in self.issues.values()
                if self._after(i.updated_at, query.get("since"))]
            if self.kind == "github" or query.get("type") != ["issues"]:  # GitHub lists pull requests as issues too
                entries += [(p.updated_at, self._github_pull_as_issue(p)) for p in self.pulls.values()
                            if self._after(p.updated_at, query.get("since"))]
            entries.sort(key=lambda pair: pair[0], reverse=True)
            return self._page(path, query, [entry for _, entry in entries])
        return None

    @staticmethod
    def _after(at: datetime, bound: list[str] | None) -> bool:
        return not bound or at >= datetime.fromisoformat(bound[0])

    @staticmethod
    def _newest(items: list[Any]) -> list[Any]:
        return sorted(items, key=lambda item: item.updated_at, reverse=True)

    def _page(self, path: str, query: dict[str, list[str]], items: list[Any]) -> tuple[Any, dict[str, str]]:
        size_key = "limit" if self.kind == "gitea" else "per_page"
        size = min(int((query.get(size_key) or ["30"])[0]), self.page_size)
        page = int((query.get("page") or ["1"])[0])
        chunk = items[(page - 1) * size:page * size]
        last = max(1, -(-len(items) // size))
        headers: dict[str, str] = {}
        if self.kind == "gitlab":
            headers = {"X-Page": str(page), "X-Per-Page": str(size), "X-Total": str(len(items)),
                       "X-Total-Pages": str(last), "X-Next-Page": str(page + 1) if page < last else ""}
        elif page < last:
            flat = {k: v[0] for k, v in query.items() if k != "page"}

            def link(n: int) -> str:
                return f"<{self.link_base or self.url}{path}?{urlencode({**flat, 'page': n})}>"

            headers = {"Link": f'{link(page + 1)}; rel="next", {link(last)}; rel="last"'}
            if self.kind == "gitea":
                headers["X-Total-Count"] = str(len(items))
        return chunk, headers

    # --- shapes ----------------------------------------------------------------------------------------------

    def _user(self, login: str) -> Json:
        return {"login": login, "id": _id(login), "type": "User",
                "html_url": f"https://github.com/{login}"}

    def _labels(self, names: list[str]) -> list[Json]:
        return [{"id": index + 1, "name": name, "color": "ededed", "description": None}
                for index, name in enumerate(names)]

    def _github_pull(self, pull: _Pull) -> Json:
        repo = {"id": 1, "full_name": self.repository, "private": False}
        shape: Json = {
            "url": f"{self.api}/repos/{self.repository}/pulls/{pull.number}", "id": 1000 + pull.number,
            "html_url": f"https://github.com/{self.repository}/pull/{pull.number}", "number": pull.number,
            "state": "closed", "locked": False, "title": pull.title, "user": self._user(pull.author),
            "body": pull.body, "labels": self._labels(pull.labels), "created_at": _github_time(pull.updated_at),
            "updated_at": _github_time(pull.updated_at), "closed_at": _github_time(pull.merged_at or pull.updated_at),
            "merged_at": _github_time(pull.merged_at), "merge_commit_sha": pull.merge_sha,
            "requested_reviewers": [], "requested_teams": [], "draft": False, "author_association": "MEMBER",
            "head": {"ref": f"feature-{pull.number}", "sha": "0" * 40, "repo": repo},
            "base": {"ref": "main", "sha": "1" * 40, "repo": repo},
        }
        if self.kind == "gitea":
            shape["merged"] = pull.merged_at is not None
        return shape

    def _github_reviews(self, pull: _Pull) -> list[Json]:
        return [{"id": index + 1, "user": self._user(login), "body": "", "state": state,
                 "submitted_at": _github_time(pull.updated_at), "commit_id": "0" * 40,
                 **({"dismissed": False, "stale": False} if self.kind == "gitea" else {})}
                for index, (login, state) in enumerate(pull.reviews)]

    def _github_issue(self, issue: _Issue) -> Json:
        return {"id": 5000 + issue.number, "number": issue.number, "title": issue.title, "user": self._user(issue.author),
                "labels": self._labels(issue.labels), "state": "closed", "state_reason": "completed",
                "closed_at": _github_time(issue.closed_at), "updated_at": _github_time(issue.updated_at),
                "created_at": _github_time(issue.updated_at), "comments": 0, "body": "",
                **({"pull_request": None} if self.kind == "gitea" else {})}

    def _github_pull_as_issue(self, pull: _Pull) -> Json:
        return {"id": 1000 + pull.number, "number": pull.number, "title": pull.title, "user": self._user(pull.author),
                "labels": self._labels(pull.labels), "state": "closed", "closed_at": _github_time(pull.updated_at),
                "updated_at": _github_time(pull.updated_at),
                "pull_request": {"url": f"{self.api}/repos/{self.repository}/pulls/{pull.number}",
                                 "merged_at": _github_time(pull.merged_at)}}

    def _gitlab_user(self, username: str) -> Json:
        return {"id": _id(username), "username": username, "name": username.title(), "state": "active"}

    def _gitlab_mr(self, pull: _Pull) -> Json:
        return {"id": 2000 + pull.number, "iid": pull.number, "project_id": 7, "title": pull.title,
                "description": pull.body, "state": "merged", "created_at": _gitlab_time(pull.updated_at),
                "updated_at": _gitlab_time(pull.updated_at), "merged_at": _gitlab_time(pull.merged_at),
                "closed_at": None, "target_branch": "main", "source_branch": f"feature-{pull.number}",
                "author": self._gitlab_user(pull.author), "reviewers": [self._gitlab_user(r) for r in pull.assigned],
                "labels": list(pull.labels), "merge_commit_sha": pull.merge_sha, "squash_commit_sha": None,
                "sha": "0" * 40, "web_url": f"https://gitlab.com/{self.repository}/-/merge_requests/{pull.number}"}

    def _gitlab_approvals(self, pull: _Pull) -> Json:
        approved = [login for login, state in pull.reviews if state == "APPROVED"]
        return {"id": 2000 + pull.number, "iid": pull.number, "project_id": 7, "title": pull.title,
                "state": "merged", "approved": bool(approved),
                "approved_by": [{"user": self._gitlab_user(login)} for login in approved]}

    def _gitlab_issue(self, issue: _Issue) -> Json:
        return {"id": 3000 + issue.number, "iid": issue.number, "project_id": 7, "title": issue.title,
                "state": "closed", "closed_at": _gitlab_time(issue.closed_at),
                "updated_at": _gitlab_time(issue.updated_at), "author": self._gitlab_user(issue.author),
                "labels": list(issue.labels)}
