"""What a forge says about a report's range: its merged pull requests and the issues closed in its window.

Each forge's REST shapes, read into ``steps.forge_model`` (field names from the public API documentation):

- GitHub: ``GET /repos/{o}/{r}/pulls?state=closed&sort=updated&direction=desc`` (``merged_at``,
  ``merge_commit_sha``, ``user.login``, ``labels[].name``, ``body``), ``/pulls/{n}/reviews`` (``user.login``,
  ``state``: ``APPROVED``, ``CHANGES_REQUESTED``, ``COMMENTED``, ``DISMISSED``, ``PENDING``) and
  ``/issues?state=closed&since=`` (pull requests carry a ``pull_request`` key there and are left out).
- Gitea and Forgejo: the same paths under ``/api/v1`` (``sort=recentupdate``, ``limit``, ``type=issues``;
  review states ``REQUEST_CHANGES``, ``COMMENT``, ``REQUEST_REVIEW``, and ``dismissed``).
- GitLab: ``GET /projects/:id/merge_requests?state=merged`` (``iid``, ``author.username``, ``reviewers``,
  ``labels`` as strings, ``merge_commit_sha``, ``squash_commit_sha``, ``sha``, ``description``),
  ``/merge_requests/:iid/approvals`` (``approved_by[].user.username``) and ``/issues?state=closed``.

A pull request belongs to the report when the commit it landed as (merge, squash, or last rebased commit) is
one of the range's: the range decides, not the forge's dates, so each is in exactly one report. The listings are
newest-updated first and stop once they reach entries updated before the window (less ``LIST_SLACK``) or after
``MAX_PAGES``; then the view is marked ``truncated``. Titles, names and labels are cut to a bound and kept as
written (rendering makes them inert).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from steps.forge_api import ForgeClient, ForgeError
from steps.forge_model import ClosedIssue, ForgeView, PullRequest

#: Pages of one listing read at most, and entries asked per page.
MAX_PAGES, PER_PAGE = 5, 50
#: Pull requests whose reviews (a page of 100, rarely two) are read: the newest merged; the rest are listed
#: without reviewers. With the listings, a reading stays under ``forge_api.MAX_REQUESTS``.
MAX_DETAILED = 25
#: A pull request merged this long before the range began may still have landed in it (a clone fetched late).
LIST_SLACK = timedelta(days=2)
#: Bounds of what is kept of the forge's text.
TITLE_CHARS, NAME_CHARS, LABELS, LABEL_CHARS, BODY_CHARS = 300, 100, 10, 60, 20_000
#: The words that make a pull request close an issue (GitHub's and GitLab's closing keywords).
_CLOSES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?|implement(?:s|ed)?)\b:?\s+#([1-9][0-9]{0,8})\b",
                     re.IGNORECASE)
#: Review states that are a verdict (the last one per person counts), across GitHub and Gitea.
_VERDICTS = {"APPROVED", "CHANGES_REQUESTED", "REQUEST_CHANGES", "DISMISSED"}
_NOT_A_REVIEW = {"PENDING", "REQUEST_REVIEW"}


@dataclass(frozen=True)
class Span:
    """A report's range as the forge is asked about it: issues closed in [``start``, ``end``); pull requests that
    landed as one of ``shas``."""

    start: datetime
    end: datetime
    shas: frozenset[str]


def read(client: ForgeClient, span: Span) -> ForgeView:
    """The forge's view of ``span``; raises ``ForgeError`` when a request fails."""
    if client.target.kind == "gitlab":
        pulls, more = _gitlab_pulls(client, span)
        issues, more_issues = _gitlab_issues(client, span)
    else:
        pulls, more = _github_pulls(client, span)
        issues, more_issues = _github_issues(client, span)
    return ForgeView(kind=client.target.kind, pulls=sorted(pulls, key=lambda p: (p.merged_at, p.number)),
                     issues=sorted(issues, key=lambda i: (i.closed_at, i.number)), truncated=more or more_issues)


def _listing(client: ForgeClient, url: str, older: datetime | None) -> tuple[list[Mapping[str, Any]], bool]:
    """The entries of a listing, newest-updated first, until one updated before ``older``; whether it stopped at
    ``MAX_PAGES`` with more to read."""
    found: list[Mapping[str, Any]] = []
    for page in client.pages(url, max_pages=MAX_PAGES):
        if not isinstance(page.body, list):
            raise ForgeError("unreadable", "a listing that is not a list")
        entries = [e for e in page.body if isinstance(e, Mapping)]
        found += entries
        if older is not None and any((_instant(e.get("updated_at")) or older) < older for e in entries):
            return found, False
        if page.next_url is None:
            return found, False
    return found, True


def _github_pulls(client: ForgeClient, span: Span) -> tuple[list[PullRequest], bool]:
    gitea = client.target.kind == "gitea"
    base = client.target.repo_path()
    params: dict[str, str | int] = (
        {"state": "closed", "sort": "recentupdate", "limit": PER_PAGE} if gitea else
        {"state": "closed", "sort": "updated", "direction": "desc", "per_page": PER_PAGE})
    entries, more = _listing(client, client.url(f"{base}/pulls", params), span.start - LIST_SLACK)
    landed = [e for e in entries if e.get("merged_at") and e.get("merge_commit_sha") in span.shas]
    landed.sort(key=lambda e: str(e.get("merged_at")), reverse=True)
    out = []
    for index, entry in enumerate(landed):
        author = _login(entry.get("user"))
        reviews: list[Mapping[str, Any]] = []
        if index < MAX_DETAILED:  # the newest first
            number = _number(entry, "number")
            review_params: dict[str, str | int] = {"limit": 100} if gitea else {"per_page": 100}
            for page in client.pages(client.url(f"{base}/pulls/{number}/reviews", review_params), max_pages=2):
                reviews += [r for r in (page.body if isinstance(page.body, list) else []) if isinstance(r, Mapping)]
        reviewers, approvals = _verdicts(reviews, author)
        out.append(PullRequest(
            number=_number(entry, "number"), title=_text(entry.get("title"), TITLE_CHARS), author=author,
            merged_at=_iso(entry.get("merged_at")), sha=str(entry["merge_commit_sha"]), reviewers=reviewers,
            approvals=approvals, labels=_labels(entry.get("labels")), closes=closes(entry.get("body"))))
    return out, more


def _verdicts(reviews: Iterable[Mapping[str, Any]], author: str) -> tuple[list[str], list[str]]:
    """Who reviewed (in order of first review, the author left out) and whose last verdict is an approval."""
    reviewers: list[str] = []
    last: dict[str, str] = {}
    for review in reviews:
        who, state = _login(review.get("user")), str(review.get("state") or "").upper()
        if not who or who == author or state in _NOT_A_REVIEW:
            continue
        if who not in reviewers:
            reviewers.append(who)
        if review.get("dismissed") is True:
            state = "DISMISSED"
        if state in _VERDICTS:
            last[who] = state
    return reviewers, [who for who in reviewers if last.get(who) == "APPROVED"]


def _github_issues(client: ForgeClient, span: Span) -> tuple[list[ClosedIssue], bool]:
    since = f"{span.start.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
    params: dict[str, str | int] = (
        {"state": "closed", "type": "issues", "since": since, "limit": PER_PAGE} if client.target.kind == "gitea"
        else {"state": "closed", "since": since, "sort": "updated", "direction": "desc", "per_page": PER_PAGE})
    entries, more = _listing(client, client.url(f"{client.target.repo_path()}/issues", params), None)
    issues = [e for e in entries if not e.get("pull_request")]
    return [_issue(e, "number", _login(e.get("user"))) for e in issues if _closed_in(e, span)], more


def _gitlab_pulls(client: ForgeClient, span: Span) -> tuple[list[PullRequest], bool]:
    base = client.target.repo_path()
    after = span.start - LIST_SLACK
    params: dict[str, str | int] = {"state": "merged", "order_by": "updated_at", "sort": "desc",
                                    "updated_after": f"{after.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}",
                                    "per_page": PER_PAGE}
    entries, more = _listing(client, client.url(f"{base}/merge_requests", params), after)
    landed = []
    for entry in entries:
        sha = next((str(entry[k]) for k in ("merge_commit_sha", "squash_commit_sha", "sha")
                    if entry.get(k) in span.shas), None)
        if entry.get("merged_at") and sha is not None:
            landed.append((entry, sha))
    landed.sort(key=lambda pair: str(pair[0].get("merged_at")), reverse=True)
    out = []
    for index, (entry, sha) in enumerate(landed):
        author = _login(entry.get("author"), "username")
        approvals: list[str] = []
        if index < MAX_DETAILED:
            answer = client.get(client.url(f"{base}/merge_requests/{_number(entry, 'iid')}/approvals")).body
            approved = answer.get("approved_by") if isinstance(answer, Mapping) else None
            approvals = [who for who in (_login(a.get("user"), "username") for a in approved or []
                                         if isinstance(a, Mapping)) if who and who != author]
        assigned = [_login(r, "username") for r in entry.get("reviewers") or [] if isinstance(r, Mapping)]
        reviewers = list(dict.fromkeys(w for w in [*assigned, *approvals] if w and w != author))
        out.append(PullRequest(
            number=_number(entry, "iid"), title=_text(entry.get("title"), TITLE_CHARS), author=author,
            merged_at=_iso(entry.get("merged_at")), sha=sha, reviewers=reviewers,
            approvals=list(dict.fromkeys(approvals)), labels=_labels(entry.get("labels")),
            closes=closes(entry.get("description"))))
    return out, more


def _gitlab_issues(client: ForgeClient, span: Span) -> tuple[list[ClosedIssue], bool]:
    params: dict[str, str | int] = {"state": "closed", "order_by": "updated_at", "sort": "desc",
                                    "updated_after": f"{span.start.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}",
                                    "per_page": PER_PAGE}
    entries, more = _listing(client, client.url(f"{client.target.repo_path()}/issues", params), None)
    return [_issue(e, "iid", _login(e.get("author"), "username")) for e in entries if _closed_in(e, span)], more


def closes(body: object) -> list[int]:
    """The issues a description closes (``Closes #12``, ``fixes #3``...), in number order."""
    if not isinstance(body, str):
        return []
    return sorted({int(n) for n in _CLOSES.findall(body[:BODY_CHARS])})


def _closed_in(entry: Mapping[str, Any], span: Span) -> bool:
    closed = _instant(entry.get("closed_at"))
    return closed is not None and span.start <= closed < span.end


def _issue(entry: Mapping[str, Any], key: str, author: str) -> ClosedIssue:
    return ClosedIssue(number=_number(entry, key), title=_text(entry.get("title"), TITLE_CHARS), author=author,
                       closed_at=_iso(entry.get("closed_at")), labels=_labels(entry.get("labels")))


def _number(entry: Mapping[str, Any], key: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ForgeError("unreadable", f"an entry without a {key}")
    return value


def _login(user: object, key: str = "login") -> str:
    return _text(user.get(key), NAME_CHARS) if isinstance(user, Mapping) else ""


def _labels(labels: object) -> list[str]:
    """Label names: GitHub and Gitea give objects with a ``name``, GitLab plain strings."""
    names = [label.get("name") if isinstance(label, Mapping) else label for label in labels or []] \
        if isinstance(labels, list) else []
    return [_text(n, LABEL_CHARS) for n in names if isinstance(n, str) and n.strip()][:LABELS]


def _text(value: object, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _instant(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _iso(value: object) -> str:
    at = _instant(value)
    if at is None:
        raise ForgeError("unreadable", "an entry without a valid time")
    return f"{at:%Y-%m-%dT%H:%M:%SZ}"
