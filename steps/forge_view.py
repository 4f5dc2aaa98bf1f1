"""COLLECT_GIT's reading of the forge (layout 6): a project's forge source, the range asked about, the view it gives.

``gather`` never fails the step: the forge's view is optional. Without a token, without a repository to ask, with
the forge down, refusing the token or rate-limited past what the step waits, the view says why
(``ForgeMissing``) and the report keeps git's view with one line saying so. What it read is stored in
COLLECT_GIT's output, so every later step and every retry reads the same view (the forge is not asked again).

The token comes from the caller (``workflows.forge_glue`` reads it from the variable the configuration names); it
is digested for the cache's keys and the rate limit's name and never logged, stored or put in a message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from engine.core import logs
from steps import forge_api, forge_read
from steps.forge_cache import EtagCache
from steps.forge_model import ForgeKind, ForgeMissing, ForgeView

log = logging.getLogger(__name__)

#: The variable a token is read from when the configuration names none, by kind of forge.
DEFAULT_TOKEN_ENV: dict[ForgeKind, str] = {"github": "GITHUB_TOKEN", "gitlab": "GITLAB_TOKEN", "gitea": "GITEA_TOKEN"}


@dataclass(frozen=True)
class ForgeSource:
    """Where and how a project's forge is asked (``[[projects]] forge``); empty fields are derived from ``origin``."""

    kind: ForgeKind | None = None
    api: str = ""
    repository: str = ""
    token_env: str = ""
    deadline_s: float = 10.0
    cache_dir: Path | None = None

    def target(self, web: str | None) -> forge_api.ForgeTarget | None:
        """The repository to ask, given the project's web address from ``origin`` (None: nowhere known)."""
        return forge_api.target_of(self.kind, self.api, self.repository, web)

    def token_variable(self, web: str | None) -> str:
        """The variable that holds the token: the configuration's, else the usual one of the forge's kind."""
        if self.token_env:
            return self.token_env
        target = self.target(web)
        return DEFAULT_TOKEN_ENV[target.kind] if target is not None else DEFAULT_TOKEN_ENV["github"]


def span_of(start: datetime, end: datetime, shas: Sequence[str]) -> forge_read.Span:
    """The range asked about: issues closed in [``start``, ``end``), pull requests landed as one of ``shas``."""
    return forge_read.Span(start=start, end=end, shas=frozenset(shas))


def gather(source: ForgeSource, web: str | None, token: str, span: forge_read.Span, *,
           pace: Callable[[str, timedelta], None], sleep: Callable[[float], object]) -> ForgeView:
    """The forge's view of ``span`` (see the module contract): read, or missing with its reason."""
    target = source.target(web)
    if target is None:
        return _missing(None, ForgeMissing(reason="no_repository"))
    if not token:
        return _missing(target.kind, ForgeMissing(reason="no_token", detail=source.token_variable(web)))
    http = forge_api.make_http(source.deadline_s)
    client = forge_api.ForgeClient(target, token, http=http, cache=EtagCache(source.cache_dir, token),
                                   pace=pace, sleep=sleep)
    try:
        view = forge_read.read(client, span)
    except forge_api.ForgeError as exc:
        return _missing(target.kind, exc.missing)
    finally:
        http.close()
    logs.event(log, logging.INFO, "forge_read", forge=target.kind, repository=target.repository,
               pulls=len(view.pulls), issues=len(view.issues), requests=client.sent, not_modified=client.cached,
               truncated=view.truncated)
    return view


def _missing(kind: ForgeKind | None, missing: ForgeMissing) -> ForgeView:
    logs.event(log, logging.WARNING, "forge_not_read", forge=kind or "unknown", reason=missing.reason,
               detail=missing.detail, effect="the report names pull requests from git only")
    return ForgeView(kind=kind, missing=missing)
