"""The run-history web page (``reportflow ui``, ``serve --ui-port``).

Server-rendered HTML over the same read model (``engine.read.run_queries``,
``engine.read.calendar_view``, ``engine.read.views``) and the same action functions
(``engine.operations.actions``, ``engine.scheduling.definitions``) as the CLI: nothing here decides
what the engine decides.
"""
