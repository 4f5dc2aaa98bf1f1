"""Scheduled, verified backups: one row per backup slot (SPEC §18).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.store.types import UTCDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "backups",
        sa.Column("slot_at", UTCDateTime, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("cron", sa.Text, nullable=False),
        sa.Column("next_slot_at", UTCDateTime, nullable=False),
        sa.Column("claimed_at", UTCDateTime, nullable=False),
        sa.Column("claimed_by", sa.String(255), nullable=False),
        sa.Column("finished_at", UTCDateTime),
        sa.Column("detail", sa.Text),
        sa.CheckConstraint("status IN ('TAKING', 'VERIFIED', 'FAILED', 'REMOVED')", name="ck_backups_status"),
        sa.PrimaryKeyConstraint("slot_at", name="pk_backups"),
    )


def downgrade() -> None:
    op.drop_table("backups")
