"""Links into a project's forge: a commit's page and a ``#N`` reference's page.

The forge is the web address ``untrusted.forge_of`` derives from the ``origin`` remote
(``https://host/owner/repo``, https and ssh remotes alike). Each forge spells its pages its
own way; the kind is told by the host, and an unknown host gets no link at all (plain text
is better than a guessed address that answers 404).

- GitHub: ``/commit/SHA``, ``/issues/N`` (GitHub redirects an issue number that is a pull
  request to the pull request), ``/pull/N``.
- GitLab (``gitlab.com`` or a host named ``gitlab.*``): ``/-/commit/SHA``, ``/-/issues/N``,
  ``/-/merge_requests/N`` (a merge request is ``!N`` there).
- Gitea and Forgejo (``codeberg.org``, hosts named ``gitea.*``/``forgejo.*``): ``/commit/SHA``,
  ``/issues/N`` (both redirect a pull request's number as GitHub does), ``/pulls/N``.
- Bitbucket (``bitbucket.org``): ``/commits/SHA``; ``#N`` names an issue or a pull request,
  which Bitbucket does not redirect between, so it stays text.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from enum import Enum

#: ``#123`` not inside a word, a path or a URL fragment (``a#1``, ``/x#2`` stay text), nor after
#: ``!`` or ``]`` (a link there would be an image or a reference).
REFERENCE = re.compile(r"(?<![\w/&#!\]])#(?P<number>[1-9][0-9]{0,8})\b")


class ForgeKind(Enum):
    GITHUB = "github"
    GITLAB = "gitlab"
    GITEA = "gitea"
    BITBUCKET = "bitbucket"


def kind_of(forge: str | None) -> ForgeKind | None:
    """Which forge ``forge`` (``https://host/owner/repo``) is, by its host; None when unknown."""
    if not forge:
        return None
    host = (urllib.parse.urlsplit(forge).hostname or "").lower()
    first = host.split(".", 1)[0]
    if host in ("github.com", "www.github.com") or first == "github":
        return ForgeKind.GITHUB
    if host == "gitlab.com" or first == "gitlab":
        return ForgeKind.GITLAB
    if host in ("codeberg.org", "gitea.com") or first in ("gitea", "forgejo", "codeberg"):
        return ForgeKind.GITEA
    if host == "bitbucket.org":
        return ForgeKind.BITBUCKET
    return None


@dataclass(frozen=True)
class ForgeLinks:
    """The link builder of one project; every method returns None when there is no link to make."""

    forge: str | None

    @property
    def kind(self) -> ForgeKind | None:
        return kind_of(self.forge)

    def commit(self, sha: str) -> str | None:
        """The web page of commit ``sha`` (a full or abbreviated hex SHA)."""
        kind = self.kind
        if kind is None or not re.fullmatch(r"[0-9a-f]{7,64}", sha):
            return None
        page = {ForgeKind.GITHUB: "commit", ForgeKind.GITLAB: "-/commit", ForgeKind.GITEA: "commit",
                ForgeKind.BITBUCKET: "commits"}[kind]
        return f"{self.forge}/{page}/{sha}"

    def reference(self, number: int) -> str | None:
        """The web page of issue or pull request ``#number``."""
        kind = self.kind
        if kind is None or kind is ForgeKind.BITBUCKET:
            return None
        page = "-/issues" if kind is ForgeKind.GITLAB else "issues"
        return f"{self.forge}/{page}/{number}"

    def pull(self, number: int) -> str | None:
        """The web page of pull request ``number`` (GitLab: merge request ``!number``)."""
        kind = self.kind
        if kind is None or kind is ForgeKind.BITBUCKET:
            return None
        page = {ForgeKind.GITHUB: "pull", ForgeKind.GITLAB: "-/merge_requests", ForgeKind.GITEA: "pulls"}[kind]
        return f"{self.forge}/{page}/{number}"
