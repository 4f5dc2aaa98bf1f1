"""release_notes: every ISO week, the tags made that week, as Markdown, posted to a webhook.

A reportflow workflow written in one file (see docs/TUTORIAL.md). The config
loads it with ``[[workflows]] path = "flow.py"``; nothing is installed.

Steps, in order:

1. ``COLLECT_TAGS``: the tags reachable from the pinned head whose tag date
   falls in the week (one ``git for-each-ref``).
2. ``RENDER_NOTES``: the notes as Markdown, written atomically to
   ``notes_dir/<week>.md`` (the same week always renders the same bytes).
3. ``POST_WEBHOOK``: the Markdown POSTed as JSON to the URL held by the
   environment variable named in ``webhook_env``, with the run's key as an
   ``Idempotency-Key`` header so the receiver can drop a repeat.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import git
from pydantic import BaseModel

from engine.plugins.authoring import StepContext, StepError, Workflow


class ReleaseSettings(BaseModel):
    """The ``[release_notes]`` section; relative paths are relative to the config file's folder."""

    repo: Path = Path(".")
    branch: str = "HEAD"
    notes_dir: Path = Path("release-notes")
    webhook_env: str = "RELEASE_WEBHOOK_URL"  # the NAME of the variable holding the URL, never the URL
    webhook_timeout_s: float = 10.0


class Tag(BaseModel):
    name: str
    sha: str
    tagged_at: str
    subject: str


class Tags(BaseModel):
    head: str
    tags: list[Tag]


class Notes(BaseModel):
    path: str
    sha256: str
    markdown: str


class Posted(BaseModel):
    status: int
    idempotency_key: str


wf = Workflow("release_notes", period="week", payload_version=1, settings=ReleaseSettings)


@wf.pin
def inputs(settings: ReleaseSettings, project: str) -> dict[str, str]:
    """Computed once, when the run is created: a retry next month still reads the same history."""
    try:
        head = git.Repo(settings.repo).commit(settings.branch).hexsha
    except (git.GitError, ValueError, OSError) as exc:
        raise StepError("GIT_REPO_NOT_FOUND", f"{settings.repo}: cannot resolve {settings.branch}: {exc}") from exc
    return {"head": head, "template": "v1"}


@wf.step(timeout="2m")
def collect_tags(ctx: StepContext, settings: ReleaseSettings) -> Tags:
    head = str(ctx.pinned["head"])
    listing = git.Repo(settings.repo).git.for_each_ref(
        "refs/tags", f"--merged={head}", "--sort=creatordate",
        "--format=%(refname:short)%09%(objectname)%09%(creatordate:iso-strict)%09%(contents:subject)")
    tags = []
    for line in listing.splitlines():
        name, sha, stamp, subject = (line.split("\t") + [""])[:4]
        if ctx.period_start_at <= datetime.fromisoformat(stamp) < ctx.period_end_at:
            tags.append(Tag(name=name, sha=sha, tagged_at=stamp, subject=subject))
    return Tags(head=head, tags=tags)


@wf.step(timeout="30s")
def render_notes(ctx: StepContext, settings: ReleaseSettings, found: Tags) -> Notes:
    lines = [f"# Release notes {ctx.business_key}", ""]
    lines += [f"- **{t.name}** ({t.tagged_at[:10]}): {t.subject or 'no message'}" for t in found.tags]
    markdown = "\n".join(lines if found.tags else [*lines, "No release this week."]) + "\n"
    target = settings.notes_dir / f"{ctx.business_key}.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, encoding="utf-8") as tmp:
        tmp.write(markdown)
    ctx.check_fence()  # this worker must still own the run when the file appears
    os.replace(tmp.name, target)
    return Notes(path=str(target), sha256=hashlib.sha256(markdown.encode()).hexdigest(), markdown=markdown)


@wf.step(timeout="1m", retry_on=["WEBHOOK_UNAVAILABLE"], retry_budget="20s")
def post_webhook(ctx: StepContext, settings: ReleaseSettings, notes: Notes) -> Posted:
    url = os.environ.get(settings.webhook_env, "")
    if not url:
        raise StepError("WEBHOOK_NOT_CONFIGURED", f"the environment variable {settings.webhook_env} is not set")
    body = json.dumps({"week": ctx.business_key, "markdown": notes.markdown}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Idempotency-Key": ctx.idempotency_key})
    ctx.check_fence()
    try:
        with urllib.request.urlopen(request, timeout=settings.webhook_timeout_s) as response:
            return Posted(status=response.status, idempotency_key=ctx.idempotency_key)
    except urllib.error.HTTPError as exc:
        if exc.code >= 500 or exc.code == 429:
            raise StepError("WEBHOOK_UNAVAILABLE", f"the webhook answered {exc.code}") from exc
        raise StepError("WEBHOOK_REJECTED", f"the webhook answered {exc.code}") from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise StepError("WEBHOOK_UNAVAILABLE", f"the webhook is unreachable: {exc}") from exc
