"""The decision before a send (``deliveries.decide_send``): at most once per report key and target."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from engine.core import deliveries
from engine.core.clock import ManualClock
from engine.core.deliveries import Delivery, DeliveryState, MessageKind, SendAction, SendOutcome

T0 = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)
KEY, TARGET = "daily_report:platform:2026-09-29", "RF_CHAT"


def row(state: DeliveryState, *, digest: str = "d1", sent: str | None = None, kind: MessageKind = MessageKind.REPORT,
        attempts: int = 1) -> Delivery:
    return Delivery(KEY, TARGET, state, kind, digest, sent, 7, attempts, None, T0)


def decide(found: Delivery | None, digest: str = "d1") -> deliveries.SendPlan:
    return deliveries.decide_send(found, key=KEY, target=TARGET, digest=digest, run_id=9, now=T0 + timedelta(1))


# (row found, digest now) -> (action, kind sent, state written)
CASES = {
    "never tried: the report": (None, "d1", SendAction.SEND, MessageKind.REPORT, DeliveryState.SENDING),
    "sent, same text: nothing": (row(DeliveryState.SENT, sent="d1"), "d1", SendAction.DONE, None, None),
    "sent, text changed: one update": (row(DeliveryState.SENT, sent="d1"), "d2", SendAction.SEND, MessageKind.UPDATE,
                                       DeliveryState.SENDING),
    "found sending: its sender died, held as unconfirmed": (row(DeliveryState.SENDING), "d1", SendAction.HOLD, None,
                                                           DeliveryState.UNCONFIRMED),
    "unconfirmed, same text: held": (row(DeliveryState.UNCONFIRMED), "d1", SendAction.HOLD, None, None),
    "unconfirmed, text changed: an update, not a copy": (row(DeliveryState.UNCONFIRMED), "d2", SendAction.SEND,
                                                         MessageKind.UPDATE, DeliveryState.SENDING),
    "failed: sent again, the same kind": (row(DeliveryState.FAILED), "d1", SendAction.SEND, MessageKind.REPORT,
                                          DeliveryState.SENDING),
    "failed update: an update again": (row(DeliveryState.FAILED, sent="d0", kind=MessageKind.UPDATE), "d1",
                                       SendAction.SEND, MessageKind.UPDATE, DeliveryState.SENDING),
    "pending (an operator's resend): sent": (row(DeliveryState.PENDING), "d1", SendAction.SEND, MessageKind.REPORT,
                                             DeliveryState.SENDING),
}


@pytest.mark.parametrize("case", list(CASES))
def test_decide_send(case: str) -> None:
    found, digest, action, kind, state = CASES[case]
    plan = decide(found, digest)
    assert (plan.action, plan.kind, plan.row.state if plan.row else None) == (action, kind, state)
    if plan.action is SendAction.SEND:
        assert plan.row is not None and plan.row.digest == digest and plan.row.run_id == 9
        assert plan.row.attempts == (found.attempts if found else 0) + 1 and plan.row.error is None


def test_a_settled_send_remembers_what_the_target_accepted() -> None:
    sending = decide(row(DeliveryState.SENT, sent="d1"), "d2").row
    assert sending is not None
    sent = deliveries.settle(sending, SendOutcome(DeliveryState.SENT), T0)
    assert (sent.state, sent.sent_digest, sent.sent_at) == (DeliveryState.SENT, "d2", T0)
    lost = deliveries.settle(sending, SendOutcome(DeliveryState.UNCONFIRMED, "no answer within 15s"), T0)
    assert (lost.state, lost.sent_digest, lost.error) == (DeliveryState.UNCONFIRMED, "d1", "no answer within 15s")


def test_a_send_ends_only_in_an_outcome() -> None:
    with pytest.raises(ValueError):
        SendOutcome(DeliveryState.SENDING)


def test_the_memory_ledger_fences_a_late_record() -> None:
    book = deliveries.MemoryDeliveries(run_id=1, now=ManualClock(T0))
    first = book.begin(KEY, TARGET, "d1")
    assert first.action is SendAction.SEND and first.row is not None
    # The step was abandoned mid-send; a later attempt finds the row SENDING and holds it.
    assert book.begin(KEY, TARGET, "d1").action is SendAction.HOLD
    assert book.rows[(KEY, TARGET)].state is DeliveryState.UNCONFIRMED
    # The abandoned send's late answer changes nothing: the row is no longer its SENDING attempt.
    assert not book.finish(KEY, TARGET, first.row.attempts, SendOutcome(DeliveryState.SENT))
    assert book.rows[(KEY, TARGET)].state is DeliveryState.UNCONFIRMED
    assert replace(book.rows[(KEY, TARGET)], updated_at=T0).error == deliveries.DIED_MID_SEND
