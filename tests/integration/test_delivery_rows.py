"""The deliveries ledger in the store: a row committed SENDING before a send, its outcome fenced, on both databases."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from engine.core.clock import ManualClock
from engine.core.deliveries import DeliveryState, MessageKind, SendAction, SendOutcome
from engine.store import delivery_rows
from engine.store.handle import Store

T0 = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)
KEY = "daily_report:platform:2026-09-29"


def test_a_row_is_sending_before_the_send_and_sent_after(store_url: str) -> None:
    store = Store.open(store_url)
    book = delivery_rows.StoreDeliveries(store, ManualClock(T0), run_id=4)
    plan = book.begin(KEY, "RF_CHAT", "d1")
    assert plan.action is SendAction.SEND and plan.kind is MessageKind.REPORT and plan.row is not None
    with store.read() as conn:  # committed: another process would see it now, before any send
        (seen,) = delivery_rows.for_keys(conn, [KEY])
    assert (seen.state, seen.attempts, seen.run_id) == (DeliveryState.SENDING, 1, 4)
    assert book.finish(KEY, "RF_CHAT", plan.row.attempts, SendOutcome(DeliveryState.SENT))
    assert book.begin(KEY, "RF_CHAT", "d1").action is SendAction.DONE  # a retry sends nothing
    update = book.begin(KEY, "RF_CHAT", "d2")  # the report was written again
    assert (update.action, update.kind) == (SendAction.SEND, MessageKind.UPDATE)
    store.dispose()


def test_a_row_left_sending_is_held_unconfirmed_and_a_late_record_is_fenced(store_url: str) -> None:
    store = Store.open(store_url)
    book = delivery_rows.StoreDeliveries(store, ManualClock(T0), run_id=4)
    first = book.begin(KEY, "RF_MAIL", "d1")
    assert first.row is not None
    assert book.begin(KEY, "RF_MAIL", "d1").action is SendAction.HOLD  # its sender died mid-send
    assert not book.finish(KEY, "RF_MAIL", first.row.attempts, SendOutcome(DeliveryState.SENT))
    with store.write() as conn:
        (held,) = delivery_rows.unconfirmed(conn)
        assert held.target == "RF_MAIL" and held.error and "may have arrived" in held.error
        assert [r.target for r in delivery_rows.resend(conn, KEY, None, T0)] == ["RF_MAIL"]
    again = book.begin(KEY, "RF_MAIL", "d1")
    assert (again.action, again.kind) == (SendAction.SEND, MessageKind.REPORT)  # sent because a person asked
    store.dispose()


def test_two_writers_deciding_at_once_send_once(store_url: str) -> None:
    store = Store.open(store_url)
    books = [delivery_rows.StoreDeliveries(store, ManualClock(T0), run_id=n) for n in (1, 2)]
    barrier = threading.Barrier(2)
    actions: list[SendAction] = []

    def decide(book: delivery_rows.StoreDeliveries) -> None:
        barrier.wait()
        actions.append(book.begin(KEY, "RF_CHAT", "d1").action)

    threads = [threading.Thread(target=decide, args=(b,)) for b in books]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(actions) == [SendAction.HOLD, SendAction.SEND]
    store.dispose()


def test_errors_are_stored_without_credentials(store_url: str) -> None:
    store = Store.open(store_url)
    book = delivery_rows.StoreDeliveries(store, ManualClock(T0), run_id=4)
    plan = book.begin(KEY, "RF_CHAT", "d1")
    assert plan.row is not None
    book.finish(KEY, "RF_CHAT", plan.row.attempts,
                SendOutcome(DeliveryState.FAILED, "refused by https://user:hunter2@chat.example/hook"))
    with store.read() as conn:
        (row,) = delivery_rows.for_keys(conn, [KEY])
    assert row.error is not None and "hunter2" not in row.error
    store.dispose()
