"""The command-line door to the engine: a thin Typer adapter (``app``) and its rich rendering (``render``)."""

from __future__ import annotations

from engine.cli.app import main

__all__ = ["main"]
