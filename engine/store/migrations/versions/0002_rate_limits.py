"""Shared rate limits; drop the write-only ``runs.resume_step``.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.store.types import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_limits",
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("next_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_rate_limits"),
    )
    # A plain DROP COLUMN (SQLite >= 3.35 has one): the column carries no index or
    # constraint, and batch mode would rebuild ``runs`` and its partial unique index.
    op.execute("ALTER TABLE runs DROP COLUMN resume_step")


def downgrade() -> None:
    op.add_column("runs", sa.Column("resume_step", sa.String(64)))
    op.drop_table("rate_limits")
