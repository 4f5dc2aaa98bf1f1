"""A workflow written with ``engine.plugins.authoring``, loaded by module path in tests (``module = "tests.flows.authored"``)."""

from __future__ import annotations

from pydantic import BaseModel

from engine.plugins.authoring import StepContext, Workflow


class Greeting(BaseModel):
    text: str


HELLO = Workflow("hello", period="day", payload_version=2)


@HELLO.step(timeout="5s", optional=True)
def greet(ctx: StepContext) -> Greeting:
    return Greeting(text=f"hello {ctx.project}")
