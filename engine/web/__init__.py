"""The run-history web page (``reportflow ui``, ``serve --ui-port``).

Server-rendered HTML over the same read model (``engine.queries``,
``engine.history``, ``engine.views``) and the same action functions
(``engine.operations``, ``engine.schedules``) as the CLI: nothing here decides
what the engine decides.
"""
