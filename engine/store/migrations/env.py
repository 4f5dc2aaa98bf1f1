"""Alembic environment: runs against the connection handed in by engine.store.database."""

from __future__ import annotations

from alembic import context

from engine.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("reportflow migrations run through `reportflow db upgrade`")

context.configure(connection=connection, target_metadata=metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
