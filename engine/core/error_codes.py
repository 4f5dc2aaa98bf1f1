"""The error codes a run can end with: whether they are retried and what an operator does.

One table, read by ``runs show`` (the runbook line of a failed run), ``doctor``
(recent failures) and the README (``markdown_table`` is its troubleshooting
table, checked by a test). Retried: ``yes`` (a run-level retry with backoff),
``no`` (fix, then ``runs retry``) or ``recovery`` (the reconciler resumes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Retried = Literal["yes", "no", "recovery"]


@dataclass(frozen=True)
class ErrorCode:
    """One code, whether the engine retries it, and the runbook line."""

    code: str
    retried: Retried
    runbook: str


CODES: tuple[ErrorCode, ...] = (
    ErrorCode("MODEL_UNAVAILABLE", "yes",
              "start Ollama (`ollama serve`), `ollama pull MODEL`, check `[llm] host`; the run is queued again by "
              "itself once Ollama answers"),
    ErrorCode("NOTION_RATE_LIMITED", "yes",
              "nothing: Retry-After is honoured; long waits become the run's `not_before`"),
    ErrorCode("NOTION_UNAVAILABLE", "yes", "Notion 5xx or timeout; the run retries with backoff, and is queued again "
              "by itself once Notion answers"),
    ErrorCode("NOTION_UNAUTHORIZED", "no",
              "the variable named by `notion.token_env` is unset or wrong, or the database is not "
              "shared with the integration; once Notion accepts the token, the run is queued again by itself"),
    ErrorCode("NOTION_NOT_FOUND", "no",
              "`notion.database_id` / `data_source_id` is wrong or the database was deleted; once it can be "
              "read, the run is queued again by itself"),
    ErrorCode("RESPONSE_TOO_LARGE", "no",
              "a server (Ollama, Notion) answered more than reportflow reads of it (16 MiB), so the rest was left "
              "unread: check what answers at `[llm] host` or `notion.base_url`, then `runs retry`"),
    ErrorCode("GIT_REPO_NOT_FOUND", "no",
              "`projects[].repo` path or branch does not exist on this node"),
    ErrorCode("GIT_COMMIT_NOT_FOUND", "yes",
              "a pinned commit is missing here (another node may have it); fetch the repository"),
    ErrorCode("REPORT_WRITE_FAILED", "no",
              "`reports.dir` is read-only, full, or a path left the reports directory"),
    ErrorCode("CONFIG_INVALID", "no", "fix the config (`reportflow doctor`), then `runs retry`"),
    ErrorCode("PAYLOAD_VERSION_UNSUPPORTED", "no",
              "the run was made by a newer reportflow; upgrade this worker"),
    ErrorCode("OUTPUT_INVALID", "no",
              "a step returned (or a stored output no longer matches) another shape than its "
              "output model; fix the step, or bump `payload_version` with a shape change"),
    ErrorCode("STEP_TIMEOUT", "yes",
              "a step ran past its timeout (its late effects are fenced off); the run retries "
              "with backoff"),
    ErrorCode("LEASE_EXPIRED", "recovery", "the worker died or stalled; the reconciler resumed the run"),
    ErrorCode("STEP_CRASHED", "yes",
              "a step raised an unexpected exception (a bug: the log line `step_crashed` has its traceback); "
              "the run retries with backoff"),
    ErrorCode("GIT_REPO_SHALLOW", "no",
              "the repository is a shallow clone, so what a report holds cannot be told: "
              "`git fetch --unshallow` in it, then `runs retry`"),
    ErrorCode("COVERAGE_BUSY", "yes",
              "other runs of the same schedule kept deciding their windows at the same moment; the run retries"),
    ErrorCode("NOTION_INVALID_REQUEST", "no",
              "Notion refused the page's content (a property or block it does not accept); check the database's "
              "title property and `reportflow doctor`, then `runs retry`"),
    ErrorCode("DELIVERY_UNAVAILABLE", "yes",
              "a `[[deliveries]]` target refused the connection, did not resolve or answered 503: nothing was "
              "sent; the run retries with backoff, and is queued again by itself once the target answers"),
    ErrorCode("DELIVERY_RATE_LIMITED", "yes", "a delivery target answered 429: nothing was sent; the run retries "
              "with backoff"),
    ErrorCode("DELIVERY_REFUSED", "no",
              "a delivery target answered 3xx or 4xx (a wrong URL or token, a target that moved): fix the URL in the "
              "variable named by `deliveries.to_env`, then `runs retry RUN --from-step DELIVER`"),
    ErrorCode("DELIVERY_TARGET_INVALID", "no",
              "a variable named by `deliveries.to_env` is unset, holds more than one URL, or one Apprise cannot "
              "send to: set it, then `runs retry RUN --from-step DELIVER`"),
    ErrorCode("DELIVERY_UNCONFIRMED", "no",
              "a delivery may or may not have arrived (no answer in time, a dropped connection, a sender that died "
              "mid-send): it is never sent again by itself; look at the target, then `runs resend RUN` if it is "
              "not there"),
    ErrorCode("CHILD_INVALID", "no", "a workflow asked for a child run without a valid name; fix the workflow"),
    ErrorCode("CHILDREN_FAILED", "no",
              "some child runs of a team report did not succeed (they are named); fix their cause, then "
              "`runs retry` the parent (it re-queues only the failed children)"),
    ErrorCode("CANCELLED", "no", "an operator cancelled the run; `runs retry` runs it again"),
)
BY_CODE = {entry.code: entry for entry in CODES}
#: The codes a run-level retry follows (``yes``) and those the reconciler resumes (``recovery``).
RETRYABLE = frozenset(entry.code for entry in CODES if entry.retried != "no")


def runbook(code: str | None) -> str | None:
    """What to do about ``code``; None for a code the table does not know."""
    entry = BY_CODE.get(code or "")
    return entry.runbook if entry else None


def markdown_table() -> str:
    """The README's troubleshooting table."""
    rows = ["| code | retried? | what to do |", "| --- | --- | --- |"]
    rows += [f"| `{e.code}` | {e.retried} | {e.runbook} |" for e in CODES]
    return "\n".join(rows) + "\n"
