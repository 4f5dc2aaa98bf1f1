"""A schedule drafted by a local Ollama model, as structured output (SPEC §16.2).

One ``POST /api/chat`` through the official client with ``format`` set to the
JSON schema of ``ModelDraft`` (a ``[[schedules]]`` entry plus ``rationale``),
so the answer is JSON the engine can validate. A server that is down, or an
answer that is not such JSON, is ``MODEL_UNAVAILABLE`` / ``InvalidInput``; the
model never decides whether the schedule is valid: the engine's validator does.
At most ``MAX_ANSWER_BYTES`` of the answer are read (a schedule entry and a line
of rationale take a few hundred bytes): a larger one is refused in one line
before it is read whole, parsed or echoed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import httpx
import ollama
import pydantic

from engine.core import errors, http_deadline

#: The most of the model's HTTP answer a draft reads (the answer itself is a few hundred bytes).
MAX_ANSWER_BYTES = 256 * 1024


class AnswerTooLarge(Exception):
    """The model's answer passed ``MAX_ANSWER_BYTES``: the rest is left unread."""


class _Capped(httpx.SyncByteStream):
    """A response body that stops with ``AnswerTooLarge`` once more than ``limit`` bytes came."""

    def __init__(self, inner: httpx.SyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        for chunk in self._inner:
            read += len(chunk)
            if read > self._limit:
                raise AnswerTooLarge(read)
            yield chunk

    def close(self) -> None:
        self._inner.close()


class BoundedTransport(httpx.BaseTransport):
    """A transport (httpx's own unless ``inner`` is given), with every answer's body capped (``_Capped``);
    for ``ollama.Client``."""

    def __init__(self, inner: httpx.BaseTransport | None = None, limit: int = MAX_ANSWER_BYTES) -> None:
        self._inner = inner if inner is not None else httpx.HTTPTransport()
        self._limit = limit

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; the answer's body is read through the cap."""
        response = self._inner.handle_request(request)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._limit:
            response.close()
            raise AnswerTooLarge(int(declared))
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_Capped(response.stream, self._limit), extensions=response.extensions)

    def close(self) -> None:
        self._inner.close()

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
        # The whole answer within timeout_s (not per read), and no bigger than MAX_ANSWER_BYTES.
        with ollama.Client(host=host, timeout=timeout_s,
                           transport=BoundedTransport(http_deadline.DeadlineTransport(timeout_s))) as client:
            response = client.chat(model=model, messages=[
                {"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
                format=schema(), options=dict(options or {}), stream=False)
    except AnswerTooLarge as exc:
        raise errors.InvalidInput(f"the model's answer is larger than {MAX_ANSWER_BYTES // 1024} KB and was not "
                                  "read (a schedule draft is a few lines); try again or use another model") from exc
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
