"""The in-step retry helper (``engine.plugins.retrying``, ``ctx.retry``) with a recorded sleep: no time passes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from engine.core import errors
from engine.plugins import retrying
from engine.plugins.contract import StepContext


class Sleeps(list[float]):
    """Stands in for ``ctx.sleep``: records the waits, never sleeps."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


class Flaky:
    """Fails with ``errors`` in turn (one per call), then returns ``"done"``; counts its calls."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.raised: list[BaseException] = []
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            self.raised.append(self.failures.pop(0))
            raise self.raised[-1]
        return "done"


def unavailable(retry_after_s: float | None = None) -> errors.StepError:
    return errors.step_error("MODEL_UNAVAILABLE", "busy", retry_after_s=retry_after_s)


def step_errors(exc: BaseException) -> bool:
    return isinstance(exc, errors.StepError) and exc.retryable


def test_retryable_errors_are_retried_with_growing_jittered_waits() -> None:
    sleeps = Sleeps()
    fn = Flaky(*[unavailable() for _ in range(4)])

    assert retrying.call(fn, sleep=sleeps, retryable=step_errors, budget=100.0, initial_s=1.0,
                         max_wait_s=10.0) == "done"

    assert fn.calls == 5 and len(sleeps) == 4
    for n, wait in enumerate(sleeps):  # 1, 2, 4, 8 s, each plus up to initial_s of jitter
        assert 2.0 ** n <= wait <= 2.0 ** n + 1.0


def test_the_waits_stop_before_the_budget_and_the_last_error_goes_up() -> None:
    sleeps = Sleeps()
    fn = Flaky(*[unavailable() for _ in range(50)])

    with pytest.raises(errors.StepError) as caught:
        retrying.call(fn, sleep=sleeps, retryable=step_errors, budget=30.0, initial_s=1.0, max_wait_s=10.0)

    assert caught.value is fn.raised[-1] and caught.value.retry_after_s is None
    assert 3 <= len(sleeps) < 10 and sum(sleeps) <= 30.0
    assert all(later >= earlier - 1.0 for earlier, later in zip(sleeps, sleeps[1:], strict=False))
    assert fn.calls == len(sleeps) + 1


def test_max_attempts_bounds_the_tries() -> None:
    sleeps = Sleeps()
    fn = Flaky(*[unavailable() for _ in range(10)])
    with pytest.raises(errors.StepError):
        retrying.call(fn, sleep=sleeps, retryable=step_errors, budget=100.0, max_attempts=4, initial_s=0.01,
                      max_wait_s=0.02)
    assert fn.calls == 4 and len(sleeps) == 3


def test_an_error_it_does_not_retry_goes_up_at_once() -> None:
    sleeps = Sleeps()
    permanent = errors.step_error("CONFIG_INVALID", "bad")
    fn = Flaky(permanent)
    with pytest.raises(errors.StepError) as caught:
        retrying.call(fn, sleep=sleeps, retryable=step_errors, budget=30.0)
    assert caught.value is permanent and fn.calls == 1 and sleeps == []


def test_retry_after_is_waited_exactly() -> None:
    sleeps = Sleeps()
    fn = Flaky(unavailable(retry_after_s=2.0), unavailable(retry_after_s=0.5))
    assert retrying.call(fn, sleep=sleeps, retryable=step_errors, budget=30.0) == "done"
    assert sleeps == [2.0, 0.5]


def test_a_retry_after_beyond_the_budget_left_goes_up_with_the_error() -> None:
    sleeps = Sleeps()
    fn = Flaky(unavailable(), unavailable(retry_after_s=29.5))
    with pytest.raises(errors.StepError) as caught:
        retrying.call(fn, sleep=sleeps, retryable=step_errors, budget=30.0, initial_s=1.0)
    assert caught.value.retry_after_s == 29.5  # the run's not_before, set by the worker
    assert len(sleeps) == 1 and fn.calls == 2  # 29.5 s no longer fitted after the first wait


def test_a_shared_budget_is_spent_by_every_call() -> None:
    sleeps = Sleeps()
    budget = retrying.RetryBudget(5.0)
    assert retrying.call(Flaky(unavailable(retry_after_s=3.0)), sleep=sleeps, retryable=step_errors,
                         budget=budget) == "done"
    assert budget.left_s == 2.0

    second = Flaky(unavailable(retry_after_s=3.0))
    with pytest.raises(errors.StepError):
        retrying.call(second, sleep=sleeps, retryable=step_errors, budget=budget)
    assert sleeps == [3.0] and second.calls == 1 and budget.waited_s == 3.0


@pytest.mark.parametrize("stopped", [errors.Interrupted("run 1: stopping while a step waited"),
                                     errors.LeaseLost(1, 7)])
def test_sigterm_or_a_lost_lease_during_a_wait_goes_up_and_nothing_is_tried_again(
        stopped: errors.ReportflowError) -> None:
    def sleep(seconds: float) -> None:
        raise stopped

    fn = Flaky(unavailable(), unavailable())
    with pytest.raises(type(stopped)) as caught:
        retrying.call(fn, sleep=sleep, retryable=step_errors, budget=30.0)
    assert caught.value is stopped and fn.calls == 1


def test_on_retry_hears_of_each_wait_before_it() -> None:
    heard: list[tuple[int, str, float]] = []
    sleeps = Sleeps()

    def on_retry(attempts: int, error: BaseException, wait_s: float) -> None:
        assert len(sleeps) == attempts - 1  # before the wait
        heard.append((attempts, type(error).__name__, wait_s))

    retrying.call(Flaky(unavailable(retry_after_s=1.0), ConnectionError()), sleep=sleeps, on_retry=on_retry,
                  retryable=lambda exc: True, budget=30.0, initial_s=0.25, max_wait_s=0.5)
    assert heard[0] == (1, "StepError", 1.0)
    assert heard[1][:2] == (2, "ConnectionError") and 0.5 <= heard[1][2] <= 0.75
    assert [wait for _, _, wait in heard] == sleeps


def context(sleep: Callable[[float], None]) -> StepContext:
    at = datetime(2026, 9, 29, tzinfo=UTC)
    return StepContext(run_id=1, workflow="echo", project="p", idempotency_key="echo:p:k", business_key="k",
                       revision=1, scheduled_for=at, period_start_at=at, period_end_at=at, timezone="UTC", attempt=1,
                       pinned={}, outputs={}, settings=None, check_fence=lambda: None, sleep=sleep)


def test_ctx_retry_waits_through_ctx_sleep() -> None:
    sleeps = Sleeps()
    ctx = context(sleeps)
    fn = Flaky(unavailable(retry_after_s=4.0))
    assert ctx.retry(fn, retryable=step_errors, budget=30.0) == "done"
    assert sleeps == [4.0] and fn.calls == 2
