from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.app.serve import decide_sleep

NOW = datetime(2026, 9, 29, 10, 0, tzinfo=UTC)
POLL = timedelta(seconds=1)


def test_sleeps_until_the_next_slot_when_it_is_sooner_than_the_poll() -> None:
    assert decide_sleep(NOW, [NOW + timedelta(milliseconds=250)], POLL) == 0.25


def test_never_longer_than_the_poll_interval_or_thirty_seconds() -> None:
    assert decide_sleep(NOW, [NOW + timedelta(hours=5)], POLL) == 1.0
    assert decide_sleep(NOW, [NOW + timedelta(hours=5)], timedelta(minutes=5)) == 30.0
    assert decide_sleep(NOW, [None, None], timedelta(minutes=5)) == 30.0


def test_a_slot_already_due_means_no_sleep() -> None:
    assert decide_sleep(NOW, [NOW - timedelta(seconds=3), NOW + timedelta(seconds=10)], POLL) == 0.0
