"""The console entry point (``reportflow``): the fast paths first, then the Typer adapter (``cli.app``).

``main`` answers ``reportflow --version`` before importing Typer or the
engine, and a ``tick`` with nothing due through ``cli.fast_tick`` when that
path can vouch for the answer (SPEC §11: process start); it hands everything
else to ``app.main``.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console entry point (``reportflow``)."""
    argv = sys.argv[1:]
    if argv == ["--version"]:
        from engine.cli import version

        sys.stdout.write(version.version_text() + "\n")
        return
    if "tick" in argv or "cycle" in argv or "--until-idle" in argv:
        from engine.cli import fast_tick

        if fast_tick.run(argv):
            return
    from engine.cli.app import main as app_main

    app_main()
