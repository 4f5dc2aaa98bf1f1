"""``engine.core.redact``: the one masking function for URL credentials, and inert server text."""

from __future__ import annotations

import pytest

from engine.core import errors, redact


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
