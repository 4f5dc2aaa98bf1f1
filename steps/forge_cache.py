"""The forge client's ETag cache on disk: one file per request URL and token, answered again on ``304``.

A forge answers a conditional request (``If-None-Match``) whose resource has not changed with ``304 Not
Modified`` and no body, and GitHub does not count it against the rate limit. So the body of every ``200``
that carried an ``ETag`` is kept here with the headers that page through it (``Link``, ``X-Next-Page``),
and sent again as the answer when the forge says nothing changed.

Keys are a digest of the token's digest and the URL: two tokens that see different things never share an
entry, and no file names the token or the URL. Writes are atomic (temp file, rename), so processes sharing
the folder read whole entries or none. The folder keeps the ``MAX_ENTRIES`` newest entries (by mtime): a URL
that carries a date (``since=``) is asked once, and must not pile up.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Entries kept in one folder; the oldest beyond it are removed after a write.
MAX_ENTRIES = 500


@dataclass(frozen=True)
class Cached:
    """A kept answer: its validator, the headers that page it, its body (parsed JSON)."""

    etag: str
    headers: dict[str, str]
    body: Any


class EtagCache:
    """Answers kept under ``folder`` for one token (``secret``: the token, only ever digested)."""

    def __init__(self, folder: Path | None, secret: str) -> None:
        self.folder = folder
        self._salt = hashlib.sha256(secret.encode()).hexdigest()

    def _path(self, url: str) -> Path | None:
        if self.folder is None:
            return None
        return self.folder / (hashlib.sha256(f"{self._salt}\0{url}".encode()).hexdigest()[:40] + ".json")

    def get(self, url: str) -> Cached | None:
        """The answer kept for ``url``; None when there is none or it cannot be read (then it is asked again)."""
        path = self._path(url)
        if path is None:
            return None
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return Cached(str(raw["etag"]), {str(k): str(v) for k, v in dict(raw["headers"]).items()}, raw["body"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, url: str, entry: Cached) -> None:
        """Keep ``entry`` for ``url`` (atomically); a folder that cannot be written only costs the cache."""
        path = self._path(url)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".forge-", suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({"etag": entry.etag, "headers": entry.headers, "body": entry.body}, out)
            os.replace(temp, path)
            self._prune(path.parent)
        except OSError:
            return

    def _prune(self, folder: Path) -> None:
        entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime if p.exists() else 0.0)
        for old in entries[:max(0, len(entries) - MAX_ENTRIES)]:
            old.unlink(missing_ok=True)
