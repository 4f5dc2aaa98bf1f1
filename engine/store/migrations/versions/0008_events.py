"""The alert outbox (SPEC §15.1): one row per event, written with the change that causes it.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.store.types import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

STATUSES = ("PENDING", "DELIVERED", "QUIET")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("dedupe_key", sa.String(255), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("at", UTCDateTime, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("schedule", sa.String(100)),
        sa.Column("run_id", sa.BigInteger),
        sa.Column("key", sa.String(255)),
        sa.Column("business_key", sa.String(64)),
        sa.Column("details", sa.JSON),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("next_try_at", UTCDateTime),
        sa.Column("delivered_at", UTCDateTime),
        sa.Column("last_error", sa.Text),
        sa.CheckConstraint("status IN (" + ", ".join(repr(s) for s in STATUSES) + ")", name="ck_events_status"),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
        sa.UniqueConstraint("dedupe_key", name="uq_events_dedupe_key"),
    )
    op.create_index("ix_events_status_next_try_at", "events", ["status", "next_try_at"])
    op.create_index("ix_events_business_key_schedule", "events", ["business_key", "schedule"])


def downgrade() -> None:
    op.drop_table("events")
