"""OllamaWriter: the report narrative from a local Ollama server (official client).

Contract:

- One ``GET /api/tags`` finds the model and its digest (a model the server
  does not have fails at once, with the ``ollama pull`` hint), then one
  ``POST /api/chat`` (non-streaming) generates with ``options`` (temperature,
  seed, num_ctx).
- Each HTTP call runs under the engine's in-step retry (``engine.plugins.retrying``):
  connection refused, dropped connections and 5xx/408/429 answers are retried
  with exponential backoff and jitter, up to ``max_attempts`` per call, within
  one waiting budget per ``write`` (``RetryPolicy.budget_s``, 30 s by default,
  SPEC §4): what the model lookup waited is no longer available to the
  generation. A timeout is not retried here: on CPU a generation that timed
  out would time out again, so the run-level retry takes it later.
- Every failure leaves as ``StepError``: ``MODEL_UNAVAILABLE`` (retryable)
  naming host and model, or ``CONFIG_INVALID`` for a request the server
  rejects as malformed (another 4xx).
- Each HTTP call ends within its timeout overall, not only per read
  (``engine.core.http_deadline``): ``LOOKUP_TIMEOUT_S`` for the lookup, ``timeout_s``
  (``[llm] timeout``) for the generation, whatever the server sends meanwhile.
- Generations are serialised per host through ``exclusive(f"ollama:{host}")``,
  a context manager the engine provides (a no-op by default); it is held for
  each generation attempt, not while waiting between attempts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import ollama
import pydantic

from engine.core import errors, http_deadline
from engine.plugins import retrying
from steps.report_model import ReportMaterial, WriterResult

T = TypeVar("T")
Exclusive = Callable[[str], AbstractContextManager[object]]

#: Timeout of the model lookup (``/api/tags``), which never waits on a generation.
LOOKUP_TIMEOUT_S = 10.0
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL)


@dataclass(frozen=True)
class RetryPolicy:
    """In-step retries: waits grow from ``initial_s`` to ``max_wait_s`` (plus up to
    ``initial_s`` of jitter), at most ``max_attempts`` tries per HTTP call, and stop
    before ``budget_s`` of waiting in all across the calls of one ``write`` (a wait
    that does not fit in what is left is not taken)."""

    budget_s: float = 30.0
    initial_s: float = 1.0
    max_wait_s: float = 10.0
    max_attempts: int = 8


class _ModelMissing(Exception):
    """The server answered, but does not have the model."""


def _no_lock(key: str) -> AbstractContextManager[object]:
    return nullcontext()


def _transient(exc: BaseException) -> bool:
    """Worth another attempt within the step."""
    if isinstance(exc, ollama.ResponseError):
        return exc.status_code >= 500 or exc.status_code in (-1, 408, 429)
    if isinstance(exc, httpx.TimeoutException):
        return False
    return isinstance(exc, (ConnectionError, httpx.TransportError))


def _model_key(name: str) -> str:
    """``llama3`` and ``llama3:latest`` name the same model."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


class OllamaWriter:
    """A ``Writer`` backed by ``ollama.Client(host=host, timeout=timeout_s)``."""

    provider = "ollama"
    reads_prompt = True

    def __init__(self, host: str, model: str, *, timeout_s: float = 300.0,
                 exclusive: Exclusive | None = None, retry: RetryPolicy = RetryPolicy(),
                 options: Mapping[str, Any] | None = None, keep_alive: str | float | None = None,
                 sleep: Callable[[float], None]) -> None:
        """``options`` are defaults under the per-call ones; ``sleep`` is the wait between attempts:
        the step's ``ctx.sleep`` (the engine's clock, ended by SIGTERM or a lost lease)."""
        self.host = host.rstrip("/")
        self.options = dict(options or {})
        self.model = model
        self.timeout_s = timeout_s
        self.retry = retry
        self.keep_alive = keep_alive
        self._exclusive: Exclusive = exclusive or _no_lock
        self._sleep = sleep

    def write(self, prompt: str, *, system: str, options: Mapping[str, Any],
              material: ReportMaterial,
              earlier: Sequence[tuple[str, str]] = ()) -> WriterResult:
        """The narrative for ``prompt`` after the ``earlier`` exchanges; raises ``StepError``
        (see the module contract)."""
        messages = [{"role": "system", "content": system}]
        for asked, answered in earlier:
            messages += [{"role": "user", "content": asked},
                         {"role": "assistant", "content": answered}]
        messages.append({"role": "user", "content": prompt})
        budget = retrying.RetryBudget(self.retry.budget_s)  # one for the lookup and the generation
        # Clients live for one call, so no connection outlives the step.
        lookup_s = min(self.timeout_s, LOOKUP_TIMEOUT_S)
        with ollama.Client(host=self.host, timeout=lookup_s,
                           transport=http_deadline.DeadlineTransport(lookup_s)) as lookup:
            digest = self._call("model lookup", lambda: self._find_digest(lookup), budget)
        with ollama.Client(host=self.host, timeout=self.timeout_s,
                           transport=http_deadline.DeadlineTransport(self.timeout_s)) as client:

            def chat() -> ollama.ChatResponse:
                with self._exclusive(f"ollama:{self.host}"):
                    return client.chat(model=self.model, messages=messages,
                                       options={**self.options, **options}, stream=False,
                                       keep_alive=self.keep_alive)

            response = self._call("generation", chat, budget)
        text = _THINKING.sub("", response.message.content or "").strip()
        return WriterResult(text=text, model=self.model, digest=digest)

    def _find_digest(self, lookup: ollama.Client) -> str | None:
        wanted = _model_key(self.model)
        for entry in lookup.list().models:
            if entry.model and _model_key(entry.model) == wanted:
                return entry.digest or None
        raise _ModelMissing(self.model)

    def _call(self, what: str, fn: Callable[[], T], budget: retrying.RetryBudget) -> T:
        """``fn()`` under the retry policy, waiting at most what is left of ``budget``
        (and spending it); any failure becomes a classified StepError."""
        policy = self.retry
        attempts = 0

        def attempt() -> T:
            nonlocal attempts
            attempts += 1
            return fn()

        try:
            return retrying.call(attempt, sleep=self._sleep, retryable=_transient, budget=budget,
                                 max_attempts=policy.max_attempts, initial_s=policy.initial_s,
                                 max_wait_s=policy.max_wait_s)
        except Exception as exc:  # noqa: BLE001 - classified below, or re-raised untouched
            classified = self._classify(exc, what, attempts)
            if classified is None:
                raise
            raise classified from exc

    def _classify(self, exc: Exception, what: str, attempts: int) -> errors.StepError | None:
        """The StepError for ``exc``; None for an error that is not the server's (a bug)."""
        where = f"ollama at {self.host}"
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
        if isinstance(exc, httpx.TimeoutException):
            return errors.step_error(
                "MODEL_UNAVAILABLE", f"{where} did not answer the {what} for model "
                f"'{self.model}' within {self.timeout_s:g}s (CPU inference may need a longer "
                "[llm] timeout)")
        if isinstance(exc, (ConnectionError, httpx.TransportError)):
            detail = "connection failed" if isinstance(exc, ConnectionError) else str(exc)
            return errors.step_error(
                "MODEL_UNAVAILABLE", f"{where} is not reachable for the {what} of model "
                f"'{self.model}' ({detail}; {tries}); is `ollama serve` running?")
        if isinstance(exc, (pydantic.ValidationError, ValueError)):
            return errors.step_error(
                "MODEL_UNAVAILABLE", f"{where} sent an unexpected answer to the {what}: {exc}")
        return None
