"""Marks: values recorded once at instants of a named timeline (the edges of a schedule's reports).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.store.types import UTCDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mark_lines",
        sa.Column("line", sa.String(255), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("line", name="pk_mark_lines"),
    )
    op.create_table(
        "marks",
        sa.Column("line", sa.String(255), nullable=False),
        sa.Column("at", UTCDateTime, nullable=False),
        sa.Column("value", sa.JSON, nullable=False),
        sa.Column("run_id", sa.BigInteger),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("line", "at", name="pk_marks"),
    )


def downgrade() -> None:
    op.drop_table("marks")
    op.drop_table("mark_lines")
