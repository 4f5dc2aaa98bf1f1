"""Messages sent to the outside at most once per key and target: their states and the decision before a send.

A report's short form goes to each target of ``[[deliveries]]`` (a chat, a mailbox). The sender (Apprise)
answers a send with a yes or a no, and a no cannot tell "the target refused it" from "the target took it,
then the connection dropped". So the ledger is an at-most-once outbox: a row per (key, target) is made
``SENDING`` and committed *before* the send; the send's outcome is recorded after. A row found
``SENDING`` later belongs to a sender that died mid-send: it becomes ``UNCONFIRMED``, like a send whose
outcome was ambiguous, and is never sent again by itself; an operator who has looked asks for it again
(``PENDING``). A send the target clearly did not take (nobody listening, an answer that refuses it) is
``FAILED`` and may be sent again.

Pure: ``decide_send`` is a function of the row and the digest of what is to be said. The SQL is
``engine.store.delivery_rows``; ``MemoryDeliveries`` keeps a ledger in memory for a step called outside
a worker.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from engine.core import clock


class DeliveryState(StrEnum):
    """A (key, target) row's state; the value is the ``state`` column."""

    PENDING = "PENDING"  # an operator asked for it to be sent again
    SENDING = "SENDING"  # committed before the send: found so later, its sender died mid-send
    SENT = "SENT"  # the target accepted it
    FAILED = "FAILED"  # the target clearly did not take it: may be sent again
    UNCONFIRMED = "UNCONFIRMED"  # may or may not have arrived: never sent again by itself


class MessageKind(StrEnum):
    """What a message says: the report, or that the report sent before was written again."""

    REPORT = "report"
    UPDATE = "update"


class SendAction(StrEnum):
    SEND = "send"  # the row is SENDING now: send, then record the outcome
    DONE = "done"  # the target has this very message already
    HOLD = "hold"  # unconfirmed: a person decides (``runs resend``)


#: States a send ends in, as the sender records them.
OUTCOMES = frozenset({DeliveryState.SENT, DeliveryState.FAILED, DeliveryState.UNCONFIRMED})
#: The error recorded on a row found SENDING: its sender stopped between the send and its record.
DIED_MID_SEND = "the sender stopped between the send and its record (the process ended): it may have arrived"


@dataclass(frozen=True)
class Delivery:
    """One (key, target) row: what was last said or tried, and how it ended.

    ``digest`` is what the latest send (or attempt) said; ``sent_digest`` what the target last
    accepted (None: nothing accepted yet). ``attempts`` counts sends and fences the record of each.
    """

    key: str
    target: str
    state: DeliveryState
    kind: MessageKind
    digest: str
    sent_digest: str | None
    run_id: int | None
    attempts: int
    error: str | None
    updated_at: datetime
    sent_at: datetime | None = None


@dataclass(frozen=True)
class SendPlan:
    """What to do for one target now, and the row as it is to be written (None: leave it)."""

    action: SendAction
    kind: MessageKind | None = None
    row: Delivery | None = None


@dataclass(frozen=True)
class SendOutcome:
    """How a send ended: ``SENT``, ``FAILED`` (clearly not taken) or ``UNCONFIRMED``; ``error`` a short reason."""

    state: DeliveryState
    error: str | None = None

    def __post_init__(self) -> None:
        if self.state not in OUTCOMES:
            raise ValueError(f"a send ends SENT, FAILED or UNCONFIRMED, not {self.state}")


def decide_send(row: Delivery | None, *, key: str, target: str, digest: str, run_id: int | None,
                now: datetime) -> SendPlan:
    """Whether to send ``digest`` to ``target`` now, given its row (None: never tried).

    - never tried: send the report;
    - SENT: nothing if the target has this digest, else one update;
    - SENDING: its sender died mid-send: UNCONFIRMED, held;
    - UNCONFIRMED: held, unless the report changed since (then one update: a new message, never a copy);
    - FAILED or PENDING: send again what was tried (the same kind), with the current digest.
    The plan's row is ``SENDING`` with one more attempt when the action is SEND.
    """
    if row is None:
        return _sending(Delivery(key, target, DeliveryState.SENDING, MessageKind.REPORT, digest, None, run_id, 0,
                                 None, now), MessageKind.REPORT, digest, run_id, now)
    state = row.state
    if state is DeliveryState.SENT:
        if row.sent_digest == digest:
            return SendPlan(SendAction.DONE)
        return _sending(row, MessageKind.UPDATE, digest, run_id, now)
    if state is DeliveryState.SENDING:
        return SendPlan(SendAction.HOLD, row=replace(row, state=DeliveryState.UNCONFIRMED, error=DIED_MID_SEND,
                                                     updated_at=now))
    if state is DeliveryState.UNCONFIRMED:
        if row.digest == digest:
            return SendPlan(SendAction.HOLD)
        return _sending(row, MessageKind.UPDATE, digest, run_id, now)
    return _sending(row, row.kind, digest, run_id, now)  # FAILED, PENDING


def _sending(row: Delivery, kind: MessageKind, digest: str, run_id: int | None, now: datetime) -> SendPlan:
    return SendPlan(SendAction.SEND, kind, replace(row, state=DeliveryState.SENDING, kind=kind, digest=digest,
                                                   run_id=run_id, attempts=row.attempts + 1, error=None,
                                                   updated_at=now))


def settle(row: Delivery, outcome: SendOutcome, now: datetime) -> Delivery:
    """``row`` (SENDING) once its send ended as ``outcome``."""
    sent = outcome.state is DeliveryState.SENT
    return replace(row, state=outcome.state, error=outcome.error, updated_at=now,
                   sent_digest=row.digest if sent else row.sent_digest, sent_at=now if sent else row.sent_at)


#: States an operator may ask to send again (``runs resend``).
RESENDABLE = frozenset({DeliveryState.UNCONFIRMED, DeliveryState.FAILED})


class DeliveryBook(Protocol):
    """The ledger a step sends through (``StepContext.deliveries``); the engine's is ``delivery_rows.StoreDeliveries``.

    ``begin`` decides and writes the row (``SENDING`` before a send) in one short transaction; ``finish``
    records the outcome of the send numbered ``attempt`` and is a no-op (False) when the row moved on since.
    """

    def begin(self, key: str, target: str, digest: str) -> SendPlan:
        """Decide for ``target`` and commit the row before anything is sent."""
        ...

    def finish(self, key: str, target: str, attempt: int, outcome: SendOutcome) -> bool:
        """Record how send ``attempt`` ended; False when the row is no longer that SENDING attempt."""
        ...


class MemoryDeliveries:
    """A ``DeliveryBook`` in memory: for a step called outside a worker (a test, a script)."""

    def __init__(self, run_id: int | None = None, now: clock.Clock = clock.REAL) -> None:
        self.rows: dict[tuple[str, str], Delivery] = {}
        self.run_id = run_id
        self.clock = now
        self._lock = threading.Lock()

    def begin(self, key: str, target: str, digest: str) -> SendPlan:
        """Decide for ``target`` and keep the row (SENDING before a send)."""
        with self._lock:
            plan = decide_send(self.rows.get((key, target)), key=key, target=target, digest=digest,
                               run_id=self.run_id, now=self.clock.now())
            if plan.row is not None:
                self.rows[(key, target)] = plan.row
            return plan

    def finish(self, key: str, target: str, attempt: int, outcome: SendOutcome) -> bool:
        """Record how send ``attempt`` ended; False when the row is no longer that SENDING attempt."""
        with self._lock:
            row = self.rows.get((key, target))
            if row is None or row.state is not DeliveryState.SENDING or row.attempts != attempt:
                return False
            self.rows[(key, target)] = settle(row, outcome, self.clock.now())
            return True
