"""One model on one Ollama server, asked the same way by every caller: the report writer
(``steps.ollama_writer``), the schedule drafter (``steps.schedule_model``), the ops summary
(``workflows.ops_report``), and ``doctor``'s check and the healer's probe (``check``).

Contract:

- A ``Server`` sends ``POST /api/chat`` (non-streaming, through the official client) and
  ``GET /api/tags`` (the model and its digest); each HTTP call ends within its timeout overall,
  not only per read (``engine.core.http_deadline``), and ``max_answer_bytes`` caps what is read of
  an answer (``RESPONSE_TOO_LARGE``, the rest unread, never retried).
- One retry policy (``RetryPolicy``, through the engine's in-step retry ``engine.plugins.retrying``):
  connection refused, dropped connections and 5xx/408/429 answers are retried with exponential
  backoff and jitter, up to ``max_attempts`` per call, within one waiting budget that the caller
  may share across calls. A timeout is not retried: on CPU a generation that timed out would time
  out again, so the run-level retry takes it later.
- One error mapping (``classify``): ``MODEL_UNAVAILABLE`` (retryable) naming host and model, with
  the ``ollama pull`` hint for a model the server lacks; ``CONFIG_INVALID`` for a request the
  server rejects as malformed (another 4xx). Anything else (a bug, the caller's lock refusing)
  goes up untouched.
- Generations are serialised per host through ``exclusive(f"ollama:{host}")`` (the engine's mutex,
  a no-op by default), held for each attempt, not while waiting between attempts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import ollama
import pydantic

from engine.core import errors, http_deadline
from engine.plugins import retrying
from engine.plugins.contract import ProbeResult

T = TypeVar("T")
Exclusive = Callable[[str], AbstractContextManager[object]]
Message = Mapping[str, str]

#: Timeout of the model lookup (``/api/tags``), which never waits on a generation.
LOOKUP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RetryPolicy:
    """In-step retries: waits grow from ``initial_s`` to ``max_wait_s`` (plus up to
    ``initial_s`` of jitter), at most ``max_attempts`` tries per HTTP call, and stop
    before ``budget_s`` of waiting in all across the calls that share a budget (a wait
    that does not fit in what is left is not taken)."""

    budget_s: float = 30.0
    initial_s: float = 1.0
    max_wait_s: float = 10.0
    max_attempts: int = 8

    @classmethod
    def within(cls, budget_s: float) -> RetryPolicy:
        """The policy of a waiting budget (``[llm] retry_budget``): a small budget waits less each time."""
        return cls(budget_s=budget_s, initial_s=min(1.0, budget_s / 8), max_wait_s=min(10.0, budget_s / 2))


class _ModelMissing(Exception):
    """The server answered, but does not have the model."""


def _no_lock(key: str) -> AbstractContextManager[object]:
    return nullcontext()


def _no_sleep(seconds: float) -> None:
    return None


def _transient(exc: BaseException) -> bool:
    """Worth another attempt within the step."""
    if isinstance(exc, ollama.ResponseError):
        return exc.status_code >= 500 or exc.status_code in (-1, 408, 429)
    if isinstance(exc, httpx.TimeoutException):
        return False
    return isinstance(exc, (ConnectionError, httpx.TransportError))


def model_key(name: str) -> str:
    """``llama3`` and ``llama3:latest`` name the same model."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


@dataclass(frozen=True)
class Server:
    """``model`` on the Ollama server at ``host``; ``sleep`` is the wait between attempts (a step's
    ``ctx.sleep``: the engine's clock, ended by SIGTERM or a lost lease)."""

    host: str
    model: str
    sleep: Callable[[float], object] = _no_sleep
    timeout_s: float = 300.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    exclusive: Exclusive | None = None
    max_answer_bytes: int = http_deadline.OLLAMA_MAX_BYTES

    @property
    def address(self) -> str:
        """The host without a trailing slash: how messages and the per-host lock name it."""
        return self.host.rstrip("/")

    def budget(self) -> retrying.RetryBudget:
        """A fresh waiting budget of the policy, to share across several calls."""
        return retrying.RetryBudget(self.retry.budget_s)

    def chat(self, messages: Sequence[Message], *, what: str, options: Mapping[str, Any] | None = None,
             format: dict[str, Any] | None = None, keep_alive: str | float | None = None,
             budget: retrying.RetryBudget | None = None) -> str:
        """The model's answer to ``messages`` (its text; with ``format``, JSON of that schema).

        ``what`` names the request in errors ("generation", "schedule draft"). Raises
        ``StepError`` (the module's mapping: ``RESPONSE_TOO_LARGE`` for an answer over the cap), or what
        ``exclusive`` raises.
        """
        with self._client(self.timeout_s) as client:

            def once() -> ollama.ChatResponse:
                with (self.exclusive or _no_lock)(f"ollama:{self.address}"):
                    response: ollama.ChatResponse = client.chat(model=self.model, messages=[dict(m) for m in messages],
                                       options=dict(options or {}), format=format, stream=False,
                                       keep_alive=keep_alive)
                    return response

            answer = self._call(what, once, budget or self.budget())
        return answer.message.content or ""

    def digest(self, budget: retrying.RetryBudget | None = None) -> str | None:
        """The model's digest from ``GET /api/tags``; ``MODEL_UNAVAILABLE`` with the ``ollama pull`` hint
        when the server does not have it."""
        lookup_s = min(self.timeout_s, LOOKUP_TIMEOUT_S)
        with self._client(lookup_s) as lookup:

            def find() -> str | None:
                wanted = model_key(self.model)
                for entry in lookup.list().models:
                    if entry.model and model_key(entry.model) == wanted:
                        return entry.digest or None
                raise _ModelMissing(self.model)

            return self._call("model lookup", find, budget or self.budget())

    def _client(self, timeout_s: float) -> ollama.Client:
        # Clients live for one call, so no connection outlives the step.
        transport = http_deadline.DeadlineTransport(timeout_s, max_bytes=self.max_answer_bytes)
        return ollama.Client(host=self.address, timeout=timeout_s, transport=transport)

    def _call(self, what: str, fn: Callable[[], T], budget: retrying.RetryBudget) -> T:
        """``fn()`` under the retry policy, waiting at most what is left of ``budget``
        (and spending it); any failure of the server's becomes ``classify``'s StepError."""
        policy = self.retry
        attempts = 0

        def attempt() -> T:
            nonlocal attempts
            attempts += 1
            return fn()

        try:
            return retrying.call(attempt, sleep=self.sleep, retryable=_transient, budget=budget,
                                 max_attempts=policy.max_attempts, initial_s=policy.initial_s,
                                 max_wait_s=policy.max_wait_s)
        except Exception as exc:  # noqa: BLE001 - classified below, or re-raised untouched
            classified = self.classify(exc, what, attempts)
            if classified is None:
                raise
            raise classified from exc

    def classify(self, exc: Exception, what: str, attempts: int) -> errors.StepError | None:
        """The StepError for ``exc`` after ``attempts`` tries; None for an error that is not the server's."""
        where = f"ollama at {self.address}"
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        missing = isinstance(exc, _ModelMissing) or (
            isinstance(exc, ollama.ResponseError) and exc.status_code == 404)
        if missing:
            return errors.step_error(
                "MODEL_UNAVAILABLE",
                f"{where} has no model '{self.model}' (run: ollama pull {self.model})")
        if isinstance(exc, ollama.ResponseError):
            if 400 <= exc.status_code < 500 and exc.status_code not in (408, 429):
                return errors.step_error(
                    "CONFIG_INVALID", f"{where} rejected the {what} request for model "
                    f"'{self.model}': HTTP {exc.status_code} {exc.error}")
            return errors.step_error(
                "MODEL_UNAVAILABLE", f"{where} failed the {what} for model '{self.model}': "
                f"HTTP {exc.status_code} {exc.error} ({tries})")
        if isinstance(exc, http_deadline.ResponseTooLarge):
            return errors.step_error("RESPONSE_TOO_LARGE", f"{where} answered the {what} for model '{self.model}' "
                                     f"with too much: {exc}")
        if isinstance(exc, httpx.TimeoutException):
            return errors.step_error(
                "MODEL_UNAVAILABLE", f"{where} did not answer the {what} for model "
                f"'{self.model}' within {self.timeout_s:g}s (CPU inference may need a longer "
                "[llm] timeout)")
        if isinstance(exc, (ConnectionError, httpx.TransportError)):
            detail = "connection failed" if isinstance(exc, ConnectionError) else str(exc)
            return errors.step_error(
                "MODEL_UNAVAILABLE", f"{where} is not reachable for the {what} of model "
                f"'{self.model}' ({detail}; {tries}); is `ollama serve` running? (or fix llm.host)")
        if isinstance(exc, (pydantic.ValidationError, ValueError)):
            return errors.step_error(
                "MODEL_UNAVAILABLE", f"{where} sent an unexpected answer to the {what}: {exc}")
        return None


def check(host: str, model: str, timeout_s: float) -> ProbeResult:
    """``doctor``'s check and the healer's probe: the server lists its models within ``timeout_s``
    (one attempt) and has ``model``; an unhealthy answer's detail is ``classify``'s message."""
    server = Server(host, model, timeout_s=timeout_s, retry=RetryPolicy(budget_s=0.0, max_attempts=1))
    try:
        server.digest()
    except errors.StepError as exc:
        return ProbeResult(False, exc.message)
    return ProbeResult(True, f"ollama at {server.address} serves {model}")


