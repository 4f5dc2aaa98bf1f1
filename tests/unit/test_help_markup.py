"""Every ``--help`` shows a config section as written: rich reads ``[worker]`` as a markup tag and drops it."""

import re
from typing import Any

import typer
from typer.testing import CliRunner

from engine.cli.app import app

# A section or key in square brackets as a help text writes it (``[worker]``, ``[[schedules]]``, ``[ui] host``).
SECTION = re.compile(r"\\?\[\[?[a-z_]+\]\]?")


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Each command with its path (Typer's own click: its groups have ``commands``)."""
    found = [(path, command)]
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            found += _commands(sub, (*path, name))
    return found


def test_every_help_shows_its_config_sections_as_written() -> None:
    runner = CliRunner()
    checked = 0
    for path, command in _commands(typer.main.get_command(app)):
        texts = [command.help or ""] + [getattr(param, "help", None) or "" for param in command.params]
        written = {match.replace("\\", "") for text in texts for match in SECTION.findall(text)}
        if not written:
            continue
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
        flat = " ".join(shown.output.replace("│", " ").split())
        for section in written:
            assert section in flat, (path, section, shown.output)
            checked += 1
    assert checked >= 6  # the loops' [worker] and [notify], serve's and ui's [ui], apply's [[schedules]] ...
