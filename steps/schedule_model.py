"""A schedule drafted by a local Ollama model, as structured output (SPEC §16.2).

One chat through ``steps.ollama_chat`` (its retries and error mapping, as for a
report) with ``format`` set to the JSON schema of ``ModelDraft`` (a ``[[schedules]]``
entry plus ``rationale``), so the answer is JSON the engine can validate. A server
that is down, or an answer that is not such JSON, is ``MODEL_UNAVAILABLE`` / ``InvalidInput``; the
model never decides whether the schedule is valid: the engine's validator does.
At most ``MAX_ANSWER_BYTES`` of the answer are read (a schedule entry and a line
of rationale take a few hundred bytes): a larger one is refused in one line
before it is read whole, parsed or echoed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

import pydantic

from engine.core import errors
from steps import ollama_chat

#: The most of the model's HTTP answer a draft reads (the answer itself is a few hundred bytes).
MAX_ANSWER_BYTES = 256 * 1024

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
        hints: Mapping[str, str], timeout_s: float, retry: ollama_chat.RetryPolicy,
        sleep: Callable[[float], object], exclusive: ollama_chat.Exclusive | None = None,
        options: Mapping[str, Any] | None = None) -> ModelDraft:
    """The model's draft of ``text``; raises ``StepError`` / ``InvalidInput`` (module contract).

    The chat is ``ollama_chat``'s, retried by ``retry`` with waits through ``sleep``, each attempt
    under ``exclusive`` (the model host's generation lock).
    """
    listed = "; ".join(f"{name} (one run per {period})" for name, period in sorted(workflows.items()))
    facts = [f"Workflows: {listed}", f"Projects: {', '.join(projects) or '(none)'}"]
    facts += [f"Use {key} = {value!r}." for key, value in sorted(hints.items())]
    prompt = "\n".join([*facts, "", f"Sentence: {text}"])
    server = ollama_chat.Server(host, model, sleep=sleep, timeout_s=timeout_s, retry=retry,
                                max_answer_bytes=MAX_ANSWER_BYTES, exclusive=exclusive)
    try:
        content = server.chat([{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
                              what="schedule draft", format=schema(), options=options)
    except errors.StepError as exc:
        if exc.code != "RESPONSE_TOO_LARGE":
            raise
        raise errors.InvalidInput(f"the model's answer is larger than {MAX_ANSWER_BYTES // 1024} KB and was not "
                                  "read (a schedule draft is a few lines); try again or use another model") from exc
    try:
        return ModelDraft.model_validate(json.loads(content))
    except (ValueError, pydantic.ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise errors.InvalidInput(f"the model's answer is not a schedule entry ({first})") from exc
