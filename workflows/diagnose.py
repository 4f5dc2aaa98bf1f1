"""``doctor`` checks of the report workflows: repositories, forges, Ollama, Notion, and the Notion pages of past runs.

Each problem line says what to run or change. Network checks are short (at
most ``TIMEOUT_S`` per request) and go through the same clients the steps use
(``steps.ollama_chat``, ``steps.notion_api``), which classify failures as the steps do. The Notion token is
read from the environment variable the config names and never appears in a
finding. Libraries are imported when the doctor runs, not at registration.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from engine.core import clock, errors
from engine.core.models import ArtifactRecord
from engine.core.pacing import LocalLimits
from engine.plugins.contract import Finding, node_name
from workflows import forge_glue
from workflows.report_settings import LlmSettings, NotionSettings, ReportSettings

TIMEOUT_S = 5.0
# Pages are checked newest first at Notion's 3 requests/s: cap the doctor's run time on a long history.
MAX_PAGES = 100


def diagnose(settings: ReportSettings, projects: Sequence[str], artifacts: Sequence[ArtifactRecord]) -> list[Finding]:
    """Findings for ``projects`` (their repositories and branches), the model server when the provider is
    ``ollama``, the Notion target when enabled, and the ``notion_page`` artifacts among ``artifacts``."""
    findings: list[Finding] = []
    for key in projects:
        findings += check_project(settings, key)
        findings += forge_glue.check(settings.project(key)) if any(p.key == key for p in settings.projects) else []
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
    """The Ollama server answers ``list`` within ``TIMEOUT_S`` and has the configured model
    (``steps.ollama_chat.check``)."""
    from steps import ollama_chat
    from workflows import providers

    probe = ollama_chat.check(llm.host, llm.model, TIMEOUT_S)
    node = node_name()
    pool = (f"generation pool {providers.pool_name(llm.host, node)}: {llm.slots} slot(s) "
            + (f"on this node ({node}; a local address: each node has its own)" if providers.is_local(llm.host)
               else "shared by every node"))
    return [Finding("ollama", probe.detail, problem=not probe.healthy), Finding("ollama", pool)]


# --- Notion --------------------------------------------------------------------------------------

#: Doctor's Notion requests, paced by the upload's rule with the slots held in this process (doctor may
#: run while the store is down); a run's upload is paced by the engine's limit shared by every worker.
_PACE = LocalLimits(clock.REAL)


def check_notion(notion: NotionSettings, pages: Sequence[ArtifactRecord]) -> list[Finding]:
    """Token set, then ``steps.notion_api.check``: the target has what an upload needs and the newest
    ``MAX_PAGES`` stored pages are still live."""
    from steps import notion_api

    token = os.environ.get(notion.token_env, "")
    if not token:
        return [Finding("notion", f"the environment variable {notion.token_env} (notion.token_env) is not set: "
                                  "export it with the Notion integration's token, or set notion.enabled = false",
                        problem=True)]
    client = notion_api.make_client(token, notion.base_url, min(TIMEOUT_S, notion.timeout.total_seconds()))
    try:
        return notion_api.check(client, token, _PACE.pace, notion.database_id, notion.data_source_id,
                                pages[:MAX_PAGES], stored=len(pages))
    finally:
        client.close()
