"""OllamaWriter: the report narrative from a local Ollama server (``steps.ollama_chat``).

Contract:

- One ``GET /api/tags`` finds the model and its digest (a model the server
  does not have fails at once, with the ``ollama pull`` hint), then one
  ``POST /api/chat`` (non-streaming) generates with ``options`` (temperature,
  seed, num_ctx).
- Both calls share one waiting budget per ``write`` (``RetryPolicy.budget_s``, 30 s by
  default): what the model lookup waited is no longer available to the generation.
  Retries, timeouts, the per-host generation lock and the error mapping are
  ``ollama_chat``'s, the same for every caller.
- A reasoning model's ``<think>`` blocks are dropped from the narrative.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from steps import ollama_chat
from steps.report_model import ReportMaterial, WriterResult

_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL)


class OllamaWriter:
    """A ``Writer`` backed by ``ollama_chat.Server(host, model, timeout_s=timeout_s)``."""

    provider = "ollama"
    reads_prompt = True

    def __init__(self, host: str, model: str, *, timeout_s: float = 300.0,
                 exclusive: ollama_chat.Exclusive | None = None,
                 retry: ollama_chat.RetryPolicy = ollama_chat.RetryPolicy(),
                 options: Mapping[str, Any] | None = None, keep_alive: str | float | None = None,
                 sleep: Callable[[float], None]) -> None:
        """``options`` are defaults under the per-call ones; ``sleep`` is the wait between attempts:
        the step's ``ctx.sleep`` (the engine's clock, ended by SIGTERM or a lost lease)."""
        self.server = ollama_chat.Server(host, model, sleep=sleep, timeout_s=timeout_s, retry=retry,
                                         exclusive=exclusive)
        self.host = self.server.address
        self.model = model
        self.options = dict(options or {})
        self.keep_alive = keep_alive

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
        budget = self.server.budget()  # one for the lookup and the generation
        digest = self.server.digest(budget)
        text = self.server.chat(messages, what="generation", options={**self.options, **options},
                                keep_alive=self.keep_alive, budget=budget)
        return WriterResult(text=_THINKING.sub("", text).strip(), model=self.model, digest=digest)
