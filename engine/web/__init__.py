"""The run-history web page (``reportflow ui``, ``serve --ui-port``).

Server-rendered HTML over the same read model (``engine.read.runs``,
``engine.read.calendar``, ``engine.read.views``) and the same action functions
(``engine.operations.actions``, ``engine.scheduling.definitions``) as the CLI: nothing here decides
what the engine decides.
"""
