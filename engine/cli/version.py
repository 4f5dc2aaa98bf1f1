"""``reportflow --version``: the installed distribution's version, read without importing the engine."""

from __future__ import annotations


def version_text() -> str:
    """``reportflow X.Y.Z``: the installed distribution's version, read without importing the engine."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"reportflow {version('reportflow')}"
    except PackageNotFoundError:
        return "reportflow (not installed: version unknown)"
