"""DELIVER: a report's short form sent to each of its targets, at most once per report key and target.

For each target, in one pass: ask the ledger (``DeliveryBook.begin``, which commits the row
``SENDING`` before anything is sent), send if it says so, and record how the send ended
(``finish``). The ledger decides what a retry, a crash or a report written again means: a target
that has the message gets nothing, one whose send was cut short is held as unconfirmed, one whose
report changed gets one update. A target that clearly did not take the message (nobody listening,
429, 503) is tried again within the step's retry budget; past it the step fails with a retryable
code and the run retries later (the ledger keeps what was sent meanwhile). A target that refused
the message, whose variable is wrong, or whose send is unconfirmed fails the step for good, after
every other target had its turn; the error names each one and what to do.

The targets and the message are built by the workflow (``workflows.delivery``); this module gets
them typed, with the ledger, the fence and the engine's sleep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from pydantic import BaseModel

from engine.core import errors
from engine.core.deliveries import DeliveryBook, DeliveryState, MessageKind, SendAction, SendOutcome
from engine.plugins import retrying
from steps import delivery_send
from steps.delivery_send import Target, Verdict
from steps.report_brief import Brief, Message, fit

#: Codes of a target that did not take the message and may later: tried again in the step, then at run level.
AGAIN = frozenset({"DELIVERY_UNAVAILABLE", "DELIVERY_RATE_LIMITED"})
#: The order in which a failed step names its cause: what retries first, then what a person must do.
PRECEDENCE = ("DELIVERY_UNAVAILABLE", "DELIVERY_RATE_LIMITED", "DELIVERY_TARGET_INVALID", "DELIVERY_REFUSED",
              "DELIVERY_UNCONFIRMED")


class TargetOutcome(BaseModel):
    """One target after DELIVER: the ledger's state, what was sent (if anything this time), and why not."""

    target: str
    state: DeliveryState
    sent: MessageKind | None = None
    error: str | None = None


class DeliverOutput(BaseModel):
    """DELIVER's persisted output: the report key the ledger keys it by, and each target's state."""

    key: str
    targets: list[TargetOutcome]


@dataclass(frozen=True)
class Settings:
    """How the step sends: the deadline of one send and the seconds of waiting its in-step retries may spend."""

    deadline_s: float = 15.0
    retry_budget_s: float = 30.0


def deliver(book: DeliveryBook, key: str, digest: str, targets: Sequence[Target],
            brief: Callable[[MessageKind], Brief], *, check_fence: Callable[[], None], sleep: Callable[[float], None],
            settings: Settings = Settings(), resend_hint: str = "") -> DeliverOutput:
    """Send the report of ``key`` (what it says: ``digest``) to each target as the ledger decides.

    ``brief(kind)`` is the short form for a report or an update. Raises ``StepError`` when a target did
    not end SENT (see the module); ``resend_hint`` is the command that sends an unconfirmed one by hand.
    """
    budget = retrying.RetryBudget(settings.retry_budget_s)
    done: list[TargetOutcome] = []
    failures: list[tuple[str, str]] = []  # (code, sentence)
    for target in targets:
        try:
            outcome = retrying.call(
                partial(_once, book, key, digest, target, brief, check_fence, settings.deadline_s),
                sleep=sleep, budget=budget, initial_s=1.0, max_wait_s=10.0,
                retryable=lambda exc: isinstance(exc, errors.StepError) and exc.code in AGAIN)
        except errors.StepError as exc:
            if exc.code not in PRECEDENCE:
                raise
            failures.append((exc.code, exc.message))
            done.append(TargetOutcome(target=target.name, state=DeliveryState.FAILED, error=exc.message))
            continue
        done.append(outcome)
        if outcome.state is DeliveryState.UNCONFIRMED:
            failures.append(("DELIVERY_UNCONFIRMED", f"{target.name}: {outcome.error or 'unconfirmed'}"))
    if failures:
        code = min((c for c, _ in failures), key=PRECEDENCE.index)
        told = "; ".join(sentence for _, sentence in failures)
        hint = f" (once checked: {resend_hint})" if resend_hint and any(
            c == "DELIVERY_UNCONFIRMED" for c, _ in failures) else ""
        raise errors.step_error(code, f"{told}{hint}")
    return DeliverOutput(key=key, targets=done)


def _once(book: DeliveryBook, key: str, digest: str, target: Target, brief: Callable[[MessageKind], Brief],
          check_fence: Callable[[], None], deadline_s: float) -> TargetOutcome:
    """One turn for one target: ask the ledger, send if it says so, record; a retryable ``StepError`` when the
    target clearly did not take the message and may later."""
    loaded = delivery_send.load(target)  # a wrong variable fails before the ledger is touched
    limits = loaded.limits
    # Both forms are made before the row is SENDING: nothing but the send itself may come between the two records.
    messages: dict[MessageKind, Message] = {
        kind: fit(brief(kind), title_chars=limits.title_chars, body_chars=limits.body_chars) for kind in MessageKind}
    plan = book.begin(key, target.name, digest)
    if plan.action is SendAction.DONE:
        return TargetOutcome(target=target.name, state=DeliveryState.SENT)
    if plan.action is SendAction.HOLD:
        row = plan.row
        return TargetOutcome(target=target.name, state=DeliveryState.UNCONFIRMED,
                             error=row.error if row is not None and row.error else
                             "an earlier send may have arrived: not sent again by itself")
    assert plan.row is not None and plan.kind is not None
    message = messages[plan.kind]
    try:
        check_fence()  # a run taken over by another worker makes no send
    except BaseException:
        book.finish(key, target.name, plan.row.attempts,
                    SendOutcome(DeliveryState.FAILED, "not sent: the run was taken over"))
        raise
    verdict: Verdict = delivery_send.send(loaded, message, deadline_s=deadline_s)
    book.finish(key, target.name, plan.row.attempts, verdict.outcome)
    if verdict.state is DeliveryState.FAILED:
        code = verdict.code or "DELIVERY_REFUSED"
        raise errors.step_error(code, f"{target.name}: {verdict.outcome.error}")
    return TargetOutcome(target=target.name, state=verdict.state, sent=plan.kind if verdict.state is
                         DeliveryState.SENT else None, error=verdict.outcome.error)
