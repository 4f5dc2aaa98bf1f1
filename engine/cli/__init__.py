"""The command-line door to the engine: a thin Typer adapter (``app``) and its rich rendering (``render``).

``main`` answers ``reportflow --version`` before importing Typer or the
engine (SPEC §11: process start), then hands everything else to ``app.main``.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console entry point (``reportflow``)."""
    if sys.argv[1:] == ["--version"]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            sys.stdout.write(f"reportflow {version('reportflow')}\n")
        except PackageNotFoundError:
            sys.stdout.write("reportflow (not installed: version unknown)\n")
        return
    from engine.cli.app import main as app_main

    app_main()


__all__ = ["main"]
