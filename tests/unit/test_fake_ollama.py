"""The fake Ollama's canned replies and ``format`` record, driven by the real ``ollama`` client."""

from __future__ import annotations

import json

import ollama

from tests.fakes.fake_ollama import DEFAULT_MODEL, DEFAULT_REPLY, FakeOllama

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def test_canned_replies_one_per_call_then_the_default_and_the_formats_asked() -> None:
    with FakeOllama() as fake, ollama.Client(host=fake.url) as client:
        fake.replies(['{"name": "web-daily"}', "second"])
        first = client.chat(model=DEFAULT_MODEL, messages=[{"role": "user", "content": "a"}],
                            format=SCHEMA, stream=False)
        second = client.chat(model=DEFAULT_MODEL, messages=[{"role": "user", "content": "b"}],
                             format="json", stream=False)
        third = client.generate(model=DEFAULT_MODEL, prompt="c", stream=False)
    assert json.loads(first.message.content or "") == {"name": "web-daily"}
    assert second.message.content == "second"
    assert third.response == DEFAULT_REPLY
    assert fake.formats == [SCHEMA, "json", None]
