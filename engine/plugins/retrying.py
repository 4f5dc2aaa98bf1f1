"""Retries inside a step, on the engine's clock: ``ctx.retry`` and ``retrying.call``.

The one helper for every retry that waits inside a step execution: the worker's
re-execution of a step within its ``retry_budget_s``, and the Ollama and Notion
clients' calls. tenacity runs the loop and draws the jittered exponential
backoff; ``policies.decide_call_retry`` decides each wait against a waiting
budget (a ``StepError``'s ``retry_after_s`` honoured, a wait that does not fit
ending the retries); the waits go through the step's ``sleep`` (``ctx.sleep``:
the engine's clock, whose ``Interrupted`` at SIGTERM and ``LeaseLost`` go up as
they are). A run-level retry is a row, never a wait here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from engine.core import errors, policies

if TYPE_CHECKING:
    from tenacity import RetryCallState

T = TypeVar("T")
#: ``on_retry(attempts, error, wait_s)``: called before each wait (e.g. to log it).
OnRetry = Callable[[int, BaseException, float], None]


@dataclass
class RetryBudget:
    """Seconds of waiting granted to one or more retried calls; each wait spends from it.

    Shared by several calls (an Ollama model lookup and the generation after it, the
    requests of one Notion upload), what one waited is no longer available to the next.
    """

    total_s: float
    waited_s: float = 0.0

    @property
    def left_s(self) -> float:
        """What is left to wait, never negative."""
        return max(0.0, self.total_s - self.waited_s)


def call(fn: Callable[[], T], *, sleep: Callable[[float], object], retryable: Callable[[BaseException], bool],
         budget: RetryBudget | float, max_attempts: int | None = None, initial_s: float = 1.0,
         max_wait_s: float = 10.0, on_retry: OnRetry | None = None) -> T:
    """``fn()``, tried again after each error ``retryable`` accepts; its result, or its last error raised.

    Waits grow from ``initial_s`` to ``max_wait_s`` (plus up to ``initial_s`` of
    jitter), or are a ``StepError``'s ``retry_after_s``; retrying stops after
    ``max_attempts`` tries, or when the next wait is longer than what is left of
    ``budget`` (seconds, or a ``RetryBudget`` shared with other calls). Each wait
    is ``sleep(seconds)``: whatever it raises goes up at once.
    """
    import tenacity  # here, not at the top: an idle worker and a plain tick never load the retry library

    spent = budget if isinstance(budget, RetryBudget) else RetryBudget(budget)
    backoff = tenacity.wait_exponential(multiplier=initial_s, max=max_wait_s) + tenacity.wait_random(0, initial_s)
    next_wait_s = 0.0

    def should_retry(state: RetryCallState) -> bool:
        nonlocal next_wait_s
        error = state.outcome.exception() if state.outcome is not None else None
        if error is None or not retryable(error):
            return False
        asked = error.retry_after_s if isinstance(error, errors.StepError) else None
        decision = policies.decide_call_retry(attempts=state.attempt_number, max_attempts=max_attempts,
                                              left_s=spent.left_s, backoff_s=backoff(state), retry_after_s=asked)
        if decision.wait_s is None:
            return False  # tenacity then raises the last error as it is
        next_wait_s = decision.wait_s
        return True

    def wait(state: RetryCallState) -> float:
        return next_wait_s

    def before_sleep(state: RetryCallState) -> None:
        spent.waited_s += next_wait_s
        error = state.outcome.exception() if state.outcome is not None else None
        if on_retry is not None and error is not None:
            on_retry(state.attempt_number, error, next_wait_s)

    def pause(seconds: float) -> None:
        sleep(seconds)

    retrying = tenacity.Retrying(retry=should_retry, wait=wait, before_sleep=before_sleep, sleep=pause,
                                 reraise=True)
    return retrying(fn)
