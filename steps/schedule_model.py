"""A schedule drafted by a local Ollama model, as structured output (SPEC §16.2).

One ``POST /api/chat`` through the official client with ``format`` set to the
JSON schema of ``ModelDraft`` (a ``[[schedules]]`` entry plus ``rationale``),
so the answer is JSON the engine can validate. A server that is down, or an
answer that is not such JSON, is ``MODEL_UNAVAILABLE`` / ``InvalidInput``; the
model never decides whether the schedule is valid: the engine's validator does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import httpx
import ollama
import pydantic

from engine.core import errors, http_deadline

SYSTEM = (
    "You turn one sentence into one reportflow schedule. Answer only with JSON matching the "
    "schema. cron is a 5-field cron expression (minute hour day-of-month month day-of-week) in "
    "the schedule's own timezone, an IANA name such as Asia/Seoul. workflow is one of the "
    "workflows listed; project is one of the projects listed. report_on, attribution, misfire "
    "and overlap are optional: leave them out unless the sentence asks for them (the default "
    "reports from the previous slot to this one, every commit by when it landed). rationale is "
    "one short line saying how you read the sentence.")


class ModelDraft(pydantic.BaseModel):
    """What the model must answer: a ``[[schedules]]`` entry and a one-line rationale."""

    model_config = pydantic.ConfigDict(extra="forbid")
    name: str
    workflow: str
    project: str
    cron: str
    timezone: str
    # The rest of a [[schedules]] entry, optional: what the model leaves out takes the lossless default.
    report_on: Literal["previous", "current", "interval"] | None = None
    attribution: Literal["landed", "authored"] | None = None
    misfire: Literal["CATCH_UP_ALL", "RUN_ONCE", "SKIP", "MANUAL"] | None = None
    overlap: Literal["QUEUE_NEW", "SKIP_NEW", "ALLOW", "BUFFER_ONE"] | None = None
    rationale: str


def schema() -> dict[str, Any]:
    """The JSON schema sent as ``format``."""
    return ModelDraft.model_json_schema()


def ask(host: str, model: str, text: str, *, workflows: Mapping[str, str], projects: list[str],
        hints: Mapping[str, str], timeout_s: float,
        options: Mapping[str, Any] | None = None) -> ModelDraft:
    """The model's draft of ``text``; raises ``StepError`` / ``InvalidInput`` (module contract)."""
    listed = "; ".join(f"{name} (one run per {period})" for name, period in sorted(workflows.items()))
    facts = [f"Workflows: {listed}", f"Projects: {', '.join(projects) or '(none)'}"]
    facts += [f"Use {key} = {value!r}." for key, value in sorted(hints.items())]
    prompt = "\n".join([*facts, "", f"Sentence: {text}"])
    try:
        with ollama.Client(host=host, timeout=timeout_s,  # the whole answer within timeout_s, not per read
                           transport=http_deadline.DeadlineTransport(timeout_s)) as client:
            response = client.chat(model=model, messages=[
                {"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
                format=schema(), options=dict(options or {}), stream=False)
    except ollama.ResponseError as exc:
        raise errors.step_error("MODEL_UNAVAILABLE", f"ollama at {host} failed the schedule "
                                f"draft with model '{model}': HTTP {exc.status_code} {exc.error}") \
            from exc
    except (ConnectionError, httpx.HTTPError) as exc:
        raise errors.step_error("MODEL_UNAVAILABLE", f"ollama at {host} is not reachable for the "
                                f"schedule draft ({exc}); is `ollama serve` running?") from exc
    content = response.message.content or ""
    try:
        return ModelDraft.model_validate(json.loads(content))
    except (ValueError, pydantic.ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise errors.InvalidInput(f"the model's answer is not a schedule entry ({first})") from exc
