"""The command-line door to the engine: a thin Typer adapter (``app``) and its rich rendering (``render``).

``main`` answers ``reportflow --version`` before importing Typer or the
engine, and a ``tick`` with nothing due through ``engine.fast_tick`` when that
path can vouch for the answer (SPEC §11: process start); it hands everything
else to ``app.main``.
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
    argv = sys.argv[1:]
    if argv == ["--version"]:
        sys.stdout.write(version_text() + "\n")
        return
    if "tick" in argv:
        from engine import fast_tick

        if fast_tick.run(argv):
            return
    from engine.cli.app import main as app_main

    app_main()


__all__ = ["main", "version_text"]
