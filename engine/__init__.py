"""reportflow engine: schedules, durable runs, step checkpoints, leases.

The engine is generic: it knows nothing about git, LLMs or Notion, and finds
workflows through the ``reportflow.workflows`` entry-point group.
"""
