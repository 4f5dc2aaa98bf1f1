"""The command-line door to the engine: a thin Typer adapter (``app``) and its rich rendering (``render``).

``main`` answers ``reportflow --version`` before importing Typer or the
engine (SPEC §11: process start), then hands everything else to ``app.main``.
"""

from __future__ import annotations

import sys


def version_text() -> str:
    """``reportflow X.Y.Z``: the installed distribution's version, read without importing the engine."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"reportflow {version('reportflow')}"
    except PackageNotFoundError:
        return "reportflow (not installed: version unknown)"


def main() -> None:
    """Console entry point (``reportflow``)."""
    if sys.argv[1:] == ["--version"]:
        sys.stdout.write(version_text() + "\n")
        return
    from engine.cli.app import main as app_main

    app_main()


__all__ = ["main", "version_text"]
