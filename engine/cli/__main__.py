"""``python -m engine.cli``: the console entry, as the ``reportflow`` command."""

from engine.cli.main import main

main()
