"""announce: every day, one message per channel, each posted by its own child run (docs/TUTORIAL.md §7).

Two workflows in one file. ``announce`` fans out: its ``SPLIT`` step names one
child run of ``announce_one`` per channel of ``[announce] channels``; the run
then waits (``WAITING``, no lease, no thread) until every child has finished,
and ``SUMMARY`` writes ``summary_dir/<day>.md`` listing how each channel went.
``announce_one`` POSTs one message to the webhook whose URL is in the
environment variable named by ``webhook_env``, with its own run key
(``announce:team:2026-01-05/ops``) as the ``Idempotency-Key``.
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from pydantic import BaseModel

from engine.plugins.authoring import ChildResult, StepContext, StepError, Workflow


class AnnounceSettings(BaseModel):
    """The ``[announce]`` section, shared by both workflows."""

    channels: list[str] = []
    summary_dir: Path = Path("announcements")
    webhook_env: str = "ANNOUNCE_WEBHOOK_URL"  # the NAME of the variable holding the URL, never the URL
    webhook_timeout_s: float = 10.0


class Message(BaseModel):
    """What the parent gives each child run."""

    channel: str
    text: str


class Posted(BaseModel):
    channel: str
    status: int


class Summary(BaseModel):
    path: str
    posted: list[str]
    failed: list[str]


announce = Workflow("announce", period="day", settings=AnnounceSettings)
announce_one = Workflow("announce_one", period="day", settings=AnnounceSettings, section="announce", inputs=Message)


@announce.fan_out(child="announce_one", timeout="30s")
def split(ctx: StepContext, settings: AnnounceSettings) -> dict[str, Message]:
    return {channel: Message(channel=channel, text=f"Stand-up notes for {ctx.business_key} are out")
            for channel in settings.channels}


@announce.step(timeout="30s")
def summary(ctx: StepContext, settings: AnnounceSettings, results: list[ChildResult[Posted]]) -> Summary:
    lines = [f"# Announcements {ctx.business_key}", ""]
    lines += [f"- {r.name}: {'posted' if r.succeeded else f'{r.status} {r.error_code}'}" for r in results]
    target = settings.summary_dir / f"{ctx.business_key}.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, encoding="utf-8") as tmp:
        tmp.write("\n".join(lines) + "\n")
    ctx.check_fence()
    os.replace(tmp.name, target)
    return Summary(path=str(target), posted=[r.name for r in results if r.succeeded],
                   failed=[r.name for r in results if not r.succeeded])


@announce_one.step(timeout="1m", retry_on=["WEBHOOK_UNAVAILABLE"], retry_budget="20s")
def post(ctx: StepContext, settings: AnnounceSettings, message: Message) -> Posted:
    url = os.environ.get(settings.webhook_env, "")
    if not url:
        raise StepError("WEBHOOK_NOT_CONFIGURED", f"the environment variable {settings.webhook_env} is not set")
    body = json.dumps({"channel": message.channel, "text": message.text}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Idempotency-Key": ctx.idempotency_key})
    ctx.check_fence()
    try:
        with urllib.request.urlopen(request, timeout=settings.webhook_timeout_s) as response:
            return Posted(channel=message.channel, status=response.status)
    except urllib.error.HTTPError as exc:
        if exc.code >= 500 or exc.code == 429:
            raise StepError("WEBHOOK_UNAVAILABLE", f"the webhook answered {exc.code}") from exc
        raise StepError("WEBHOOK_REJECTED", f"the webhook answered {exc.code}") from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise StepError("WEBHOOK_UNAVAILABLE", f"the webhook is unreachable: {exc}") from exc
