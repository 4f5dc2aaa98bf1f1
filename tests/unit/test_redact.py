"""``engine.core.redact``: the one masking function for URL credentials, and inert server text."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core import errors, limits, logs, redact


@pytest.mark.parametrize(("text", "shown"), [
    ("http://user:pass@host:11434", "http://user:***@host:11434"),
    ("postgresql+psycopg://rf:p@ss:w@db.example:5432/rf", "postgresql+psycopg://rf:***@db.example:5432/rf"),
    ("cannot reach https://u:s3cret@a.example/x and http://v:t0p@b.example", "cannot reach https://u:***@a.example/x and http://v:***@b.example"),
    ("https://TOKEN123@hooks.example/alerts", "https://***@hooks.example/alerts"),
    ("http://host:8080/path?next=a@b", "http://host:8080/path?next=a@b"),
    ("mail alice@example.com about http://host/", "mail alice@example.com about http://host/"),
])
def test_every_url_password_is_masked_and_nothing_else_changes(text: str, shown: str) -> None:
    assert redact.mask_urls(text) == shown


def test_an_engine_error_never_carries_a_url_password() -> None:
    assert "s3cret" not in errors.InvalidInput("store url 'postgresql://rf:s3cret@db/rf' is wrong").message
    assert "s3cret" not in str(errors.step_error("MODEL_UNAVAILABLE", "http://u:s3cret@h refused"))


def test_server_text_becomes_one_inert_line() -> None:
    assert redact.neutralise("a\nb\x1b[2J\x07\u202ec\td") == "a b[2Jc d"
    assert redact.neutralise("한국어 ok") == "한국어 ok"
    assert redact.neutralise("x\ny", keep_newlines=True) == "x\ny"


# -- issue 36, item 4: masking in linear time, error text clipped -------------------------------------

# The pattern before it was made linear: the reference for what must be masked.
OLD_PATTERN = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s:/@?#]*)(?P<password>:[^\s/?#]*)?@")
SLOW = 2.0  # CPU seconds; the old pattern took 2 s for 40,000 characters (quadratic: hours for 20 MB)


def old_mask(text: str) -> str:
    def mask(match: re.Match[str]) -> str:
        if match["password"] is None:
            return f"{match['scheme']}***@"
        return f"{match['scheme']}{match['user']}:***@"
    return OLD_PATTERN.sub(mask, text) if "@" in text else text


def timed(fn: Callable[[], str]) -> tuple[str, float]:
    """``fn()`` and the CPU time this thread spent on it: a loaded machine slows the wall clock, not the work."""
    started = time.thread_time()
    result = fn()
    return result, time.thread_time() - started


MB20 = 20_000_000


@pytest.mark.parametrize("body", [
    "@ ://" + "E" * MB20,  # the probe's shape, with a scheme separator in it
    "@ " + "E" * MB20 + "://",
    "a:" * (MB20 // 2) + "@://",
    "a://" + ":" * MB20 + "@",
    ("x" * 1000 + " https://u:p@h.example/ ") * (MB20 // 1025),
], ids=["letters-after-at", "scheme-at-the-end", "colons", "long-password", "many-urls"])
def test_twenty_megabytes_of_server_text_are_masked_in_under_two_seconds(body: str) -> None:
    masked, took = timed(lambda: redact.mask_urls(body))
    assert took < SLOW, f"{took:.2f}s"
    assert ":p@" not in masked


TEXTISH = st.text(alphabet=st.sampled_from(list("aZ9+.-:/@?# \n\t\u202ex")), max_size=300)


@settings(deadline=None, max_examples=400)
@given(TEXTISH)
def test_the_linear_mask_masks_exactly_what_the_old_pattern_did(text: str) -> None:
    assert redact.mask_urls(text) == old_mask(text)


CANARY = "Canary5ecret"


@settings(deadline=None, max_examples=25)
@given(noise=st.text(alphabet=st.sampled_from(list("aE9+.-:/@?#x ")), min_size=1, max_size=64),
       size=st.integers(1, 1_000_000), places=st.lists(st.floats(0, 1), min_size=1, max_size=5),
       scheme=st.sampled_from(["http", "https", "postgresql+psycopg", "git+ssh"]))
def test_every_url_password_in_up_to_a_megabyte_of_noise_is_masked_quickly(
        noise: str, size: int, places: list[float], scheme: str) -> None:
    filler = (noise * (size // len(noise) + 1))[:size]
    cuts = [0, *sorted(int(p * size) for p in places), size]
    pieces = [filler[a:b] for a, b in zip(cuts, cuts[1:])]
    text = "".join(f"{piece} {scheme}://user{index}:{CANARY}{index}@db.example:5432/x "
                   for index, piece in enumerate(pieces[:-1])) + pieces[-1]
    masked, took = timed(lambda: redact.mask_urls(text))
    assert CANARY not in masked
    assert took < SLOW, f"{took:.2f}s for {len(text)} characters"


def test_error_text_is_masked_then_clipped_to_the_named_limit_with_a_marker() -> None:
    huge = "ollama said: http://u:s3cret@h.example/ " + "@ " + "E" * MB20
    error, took = timed(lambda: errors.step_error("MODEL_UNAVAILABLE", huge).message)
    assert took < SLOW
    assert "s3cret" not in error and "http://u:***@h.example/" in error
    assert len(error) <= limits.ERROR_TEXT + 40
    assert re.search(r"E… \[[0-9]{8} more characters cut\]\Z", error)
    # a password cut in half by the limit is still masked whole
    edge = "x" * (limits.ERROR_TEXT - 20) + " http://user:s3cretpassword@host/"
    assert "s3cr" not in errors.InvalidInput(edge).message


def test_a_log_line_carries_at_most_the_limit_of_an_error(caplog: pytest.LogCaptureFixture) -> None:
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "%s", ("E" * MB20,), None)
    for formatter in (logs.TextFormatter("%(message)s"), logs.JsonFormatter()):
        assert len(formatter.format(record)) < limits.ERROR_TEXT + 400
    logger = logging.getLogger("test_redact_field")
    with caplog.at_level(logging.ERROR, logger="test_redact_field"):
        logs.event(logger, logging.ERROR, "step_failed", error="E" * MB20)
    assert len(caplog.records[-1].getMessage()) < limits.ERROR_TEXT + 200


def test_neutralise_is_linear_too() -> None:
    text = "line\x1b[2J\u202e\n" * (MB20 // 10)
    clean, took = timed(lambda: redact.neutralise(text))
    assert took < SLOW and "\x1b" not in clean and "\u202e" not in clean
