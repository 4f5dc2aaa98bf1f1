"""The outside services the report workflows depend on, for the engine's healer (SPEC §15.5).

``providers(settings)`` names them with the error codes that mean each one failed a run
and a cheap probe: the Ollama server (``GET /api/tags`` through the official client, the
doctor's own check: the configured model present) when the provider is ``ollama``,
Notion (one authenticated read of the configured database or data source through
notion-client) when enabled, and the ``[[deliveries]]`` targets (``workflows.delivery``). Names and labels hold no secret (credentials in URLs are masked; the token
is read from its variable at each probe and appears nowhere). Nothing is imported or
sent until a probe runs.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial

from engine.core import redact
from engine.plugins.contract import ProbeResult, Provider, StepContext, node_name
from workflows import delivery
from workflows.report_settings import LlmSettings, NotionSettings, ReportSettings

#: The step that asks the model (the daily's and the team report's): its time is the model server's.
GENERATE_REPORT = "GENERATE_REPORT"
#: Error codes that mean the model server failed a run.
OLLAMA_CODES = frozenset({"MODEL_UNAVAILABLE"})
#: Error codes that mean Notion failed a run (its refusal of a page's content is not the service's failure).
NOTION_CODES = frozenset({"NOTION_UNAUTHORIZED", "NOTION_UNAVAILABLE", "NOTION_RATE_LIMITED", "NOTION_NOT_FOUND"})
#: A probe's longest wait for an answer (the doctor's).
PROBE_TIMEOUT_S = 5.0


def generation_slot(ctx: StepContext, llm: LlmSettings) -> Callable[[str], AbstractContextManager[object]]:
    """What a generation holds on its model host (``ollama_chat.Server``'s ``exclusive``): one of the host's
    ``[llm] slots``, in its pool (``pool_name``)."""
    return host_slot(ctx.slots, llm, ctx.node)


def host_slot(slots: Callable[[str, int], AbstractContextManager[object]], llm: LlmSettings,
              node: str) -> Callable[[str], AbstractContextManager[object]]:
    """One of the ``[llm] slots`` of the model host's pool, taken through ``slots`` (``Store.slot``): the one
    pool a report's generation and the page's schedule draft share."""
    name = pool_name(llm.host, node)
    return lambda _: slots(name, llm.slots)


def pool_name(host: str, node: str) -> str:
    """The pool of generation slots of the model host at ``host``: shared by every node for a host they all
    reach (``ollama:ADDRESS``, the lock's name of old), one per node for a local address (``ollama:ADDRESS on NODE``:
    each node's own model server, which another node's generations must not queue behind)."""
    address = redact.mask_urls(host.rstrip("/"))
    # "on", not "@NODE": "http://127.0.0.1:11434@node" reads as a URL whose password is the port, and is masked
    return f"ollama:{address} on {node}" if is_local(host) else f"ollama:{address}"


def is_local(host: str) -> bool:
    """Whether ``host`` (``http://127.0.0.1:11434``, ``localhost:11434``) names this machine: a loopback address."""
    parts = urllib.parse.urlsplit(host if "://" in host else f"http://{host}")
    name = (parts.hostname or "").lower()
    if name in ("localhost", "ip6-localhost") or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def providers(settings: ReportSettings | None) -> tuple[Provider, ...]:
    """The model server (provider ``ollama``) and Notion (when enabled) of these settings."""
    if settings is None:
        return ()
    found: list[Provider] = []
    if settings.llm.provider == "ollama":
        host = redact.mask_urls(settings.llm.host.rstrip("/"))
        found.append(Provider(name=f"ollama:{host}", label=f"ollama at {host}", codes=OLLAMA_CODES,
                              probe=partial(probe_ollama, settings.llm), timed_step=GENERATE_REPORT,
                              pool=(pool_name(settings.llm.host, node_name()), settings.llm.slots)))
    notion = settings.notion
    if notion.enabled:
        target = f"data source {notion.data_source_id}" if notion.data_source_id else f"database {notion.database_id}"
        base = redact.mask_urls(notion.base_url.rstrip("/"))
        found.append(Provider(name=f"notion:{base or 'api.notion.com'}:{target}",
                              label=f"notion{' at ' + base if base else ''} ({target})", codes=NOTION_CODES,
                              probe=partial(probe_notion, notion)))
    return (*found, *delivery.providers(settings))


def probe_ollama(llm: LlmSettings) -> ProbeResult:
    """The server lists its models within the doctor's timeout, and has the configured one."""
    from steps import ollama_chat

    return ollama_chat.check(llm.host, llm.model, PROBE_TIMEOUT_S)


def probe_notion(notion: NotionSettings) -> ProbeResult:
    """The token is set, then one authenticated read of the target (``steps.notion_api.probe``)."""
    from steps import notion_api

    token = os.environ.get(notion.token_env, "")
    if not token:
        return ProbeResult(False, f"the environment variable {notion.token_env} (notion.token_env) is not set")
    client = notion_api.make_client(token, notion.base_url, min(PROBE_TIMEOUT_S, notion.timeout.total_seconds()),
                                    quiet=True)
    try:
        return notion_api.probe(client, token, notion.database_id, notion.data_source_id)
    finally:
        client.close()
