"""``doctor`` checks of the report workflows: repositories, Ollama, Notion, and the Notion pages of past runs.

Each problem line says what to run or change. Network checks are short (at
most ``TIMEOUT_S`` per request) and go through the same clients the steps use
(``ollama.Client``, ``steps.upload_notion.make_client``). The Notion token is
read from the environment variable the config names and never appears in a
finding. Libraries are imported when the doctor runs, not at registration.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from engine.core import clock, errors
from engine.core.models import ArtifactRecord
from engine.core.pacing import LocalLimits
from engine.plugins.contract import Finding
from workflows.report_settings import LlmSettings, NotionSettings, ReportSettings

TIMEOUT_S = 5.0
# Pages are checked newest first at Notion's 3 requests/s: cap the doctor's run time on a long history.
MAX_PAGES = 100
REPORT_KEY = "Report Key"


def diagnose(settings: ReportSettings, projects: Sequence[str], artifacts: Sequence[ArtifactRecord]) -> list[Finding]:
    """Findings for ``projects`` (their repositories and branches), the model server when the provider is
    ``ollama``, the Notion target when enabled, and the ``notion_page`` artifacts among ``artifacts``."""
    findings: list[Finding] = []
    for key in projects:
        findings += check_project(settings, key)
    if projects and settings.llm.provider == "ollama":
        findings += check_ollama(settings.llm)
    pages = sorted((a for a in artifacts if a.kind == "notion_page"),
                   key=lambda a: (a.created_at is not None, a.created_at), reverse=True)
    if settings.notion.enabled and (projects or pages):
        findings += check_notion(settings.notion, pages)
    elif pages:
        findings.append(Finding("notion", f"notion is disabled: {len(pages)} stored page(s) not checked"))
    return findings


# --- git -----------------------------------------------------------------------------------------

def check_project(settings: ReportSettings, key: str) -> list[Finding]:
    """The project's repository opens with GitPython and each configured branch resolves to a commit."""
    import git

    try:
        project = settings.project(key)
    except errors.ConfigInvalid as exc:
        return [Finding("repository", f"project {key}: {exc.message}", problem=True)]
    where = f"project {key}: repository {project.repo}"
    if not project.repo.exists():
        return [Finding("repository", f"{where} does not exist: clone the repository there, or fix "
                                      "projects[].repo in the config", problem=True)]
    try:
        repo = git.Repo(project.repo)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, OSError):
        return [Finding("repository", f"{where} is not a git repository: point projects[].repo at a clone "
                                      "(the folder that holds .git)", problem=True)]
    findings: list[Finding] = []
    resolved: list[str] = []
    try:
        for branch in project.branches:
            try:
                resolved.append(f"{branch} ({repo.commit(branch).hexsha[:10]})")
            except (git.BadName, git.GitCommandError, ValueError):
                findings.append(Finding("repository", f"{where}: branch '{branch}' does not resolve to a commit: "
                                                      "fix projects[].branches (see `git branch -a`), or fetch it",
                                        problem=True))
    finally:
        repo.close()
    if not findings:
        findings.append(Finding("repository", f"{where}: {', '.join(resolved)}"))
    return findings


# --- Ollama --------------------------------------------------------------------------------------

def check_ollama(llm: LlmSettings) -> list[Finding]:
    """The Ollama server answers ``list`` within ``TIMEOUT_S`` and has the configured model."""
    import httpx
    import ollama

    from engine.core import http_deadline

    try:
        with ollama.Client(host=llm.host, timeout=TIMEOUT_S,
                           transport=http_deadline.DeadlineTransport(TIMEOUT_S)) as client:
            listing = client.list()
    except (ConnectionError, httpx.TransportError) as exc:
        return [Finding("ollama", f"Ollama at {llm.host} is not reachable ({type(exc).__name__}): start it "
                                  "with `ollama serve`, or fix llm.host", problem=True)]
    except ollama.ResponseError as exc:
        return [Finding("ollama", f"Ollama at {llm.host} answered HTTP {exc.status_code} ({exc.error}): check "
                                  "that llm.host points at an Ollama server", problem=True)]
    present = {m.model for m in listing.models if m.model}
    wanted = {llm.model} if ":" in llm.model else {llm.model, f"{llm.model}:latest"}
    if not present & wanted:
        return [Finding("ollama", f"Ollama at {llm.host} has no model '{llm.model}' (llm.model): run "
                                  f"`ollama pull {llm.model}`", problem=True)]
    return [Finding("ollama", f"Ollama at {llm.host} serves {llm.model}")]


# --- Notion --------------------------------------------------------------------------------------

class _Unhealthy(Exception):
    """A Notion check failed; ``message`` is the finding's text (already scrubbed of the token)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


#: Doctor's Notion requests, paced by the upload's rule with the slots held in this process (doctor may
#: run while the store is down); a run's upload is paced by the engine's limit shared by every worker.
_PACE = LocalLimits(clock.REAL)


def _call(token: str, what: str, fn: Callable[..., Any], *, not_found: str, **kwargs: Any) -> Any:
    """One paced Notion request; failures become ``_Unhealthy`` with what to do about them."""
    import httpx
    from notion_client.errors import HTTPResponseError, InvalidPathParameterError, RequestTimeoutError

    from steps import upload_notion

    _PACE.pace(upload_notion.rate_limit_name(token), upload_notion.REQUEST_INTERVAL)
    try:
        return fn(**kwargs)
    except HTTPResponseError as exc:
        if exc.status == 404:
            raise _Unhealthy(not_found) from exc
        if exc.status in (401, 403):
            raise _Unhealthy(f"Notion refused the token while {what} (HTTP {exc.status}): check the token in "
                             "the variable notion.token_env names, and share the database with the "
                             "integration") from exc
        detail = str(exc).replace(token, "***")[:200]
        raise _Unhealthy(f"Notion answered HTTP {exc.status} while {what}: {detail}") from exc
    except InvalidPathParameterError as exc:
        raise _Unhealthy(not_found) from exc
    except (RequestTimeoutError, httpx.TransportError) as exc:
        raise _Unhealthy(f"cannot reach Notion while {what} ({type(exc).__name__}): check the network or "
                         "notion.base_url") from exc


def check_notion(notion: NotionSettings, pages: Sequence[ArtifactRecord]) -> list[Finding]:
    """Token set, database or data source reachable with a ``Report Key`` text property and a title,
    and the newest ``MAX_PAGES`` stored pages still live (not in the trash, not 404)."""
    from steps import upload_notion

    token = os.environ.get(notion.token_env, "")
    if not token:
        return [Finding("notion", f"the environment variable {notion.token_env} (notion.token_env) is not set: "
                                  "export it with the Notion integration's token, or set notion.enabled = false",
                        problem=True)]
    client = upload_notion.make_client(token, notion.base_url, min(TIMEOUT_S, notion.timeout.total_seconds()))
    try:
        source_id = notion.data_source_id or _first_source(token, client, notion.database_id)
        source = _call(token, "reading the data source", client.data_sources.retrieve, data_source_id=source_id,
                       not_found=f"Notion data source {source_id} not found: check notion.data_source_id and "
                                 "share the database with the integration")
        return _check_schema(source_id, source.get("properties") or {}) + _check_pages(token, client, pages)
    except _Unhealthy as exc:
        return [Finding("notion", exc.message, problem=True)]
    finally:
        client.close()


def _first_source(token: str, client: Any, database_id: str) -> str:
    database = _call(token, "reading the database", client.databases.retrieve, database_id=database_id,
                     not_found=f"Notion database {database_id} not found: check notion.database_id and share "
                               "the database with the integration")
    sources = database.get("data_sources") or []
    if not sources:
        raise _Unhealthy(f"Notion database {database_id} has no data source: add one in Notion")
    return str(sources[0]["id"])


def _check_schema(source_id: str, schema: dict[str, Any]) -> list[Finding]:
    found: list[Finding] = []
    key_type = (schema.get(REPORT_KEY) or {}).get("type")
    if key_type != "rich_text":
        found.append(Finding("notion", f"data source {source_id} needs a text property named '{REPORT_KEY}' "
                                       f"(found {key_type or 'none'}): add it in Notion", problem=True))
    if not any(isinstance(p, dict) and p.get("type") == "title" for p in schema.values()):
        found.append(Finding("notion", f"data source {source_id} has no title property: add one in Notion",
                             problem=True))
    if not found:
        found.append(Finding("notion", f"data source {source_id} is reachable, with '{REPORT_KEY}' and a title"))
    return found


def _check_pages(token: str, client: Any, pages: Sequence[ArtifactRecord]) -> list[Finding]:
    found: list[Finding] = []
    for record in pages[:MAX_PAGES]:
        page_id = record.external_id or record.location
        repair = f"run `reportflow runs retry {record.run_id} --from-step {record.step}`"
        gone = f"run {record.run_id}: Notion page {page_id} no longer exists (404): {repair}"
        try:
            page = _call(token, f"reading page {page_id}", client.pages.retrieve, page_id=page_id, not_found=gone)
        except _Unhealthy as exc:
            found.append(Finding("notion", exc.message, problem=True))
            if exc.message != gone:
                break  # the API itself is failing: one line says so, not one per page
            continue
        if page.get("in_trash") or page.get("archived"):
            found.append(Finding("notion", f"run {record.run_id}: Notion page {page_id} is in the trash: {repair}",
                                 problem=True))
    if pages and not found:
        checked = min(len(pages), MAX_PAGES)
        found.append(Finding("notion", f"{checked} of {len(pages)} stored page(s) checked, all live"))
    return found
