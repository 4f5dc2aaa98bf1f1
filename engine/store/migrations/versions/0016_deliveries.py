"""The at-most-once outbox of reports sent to chats and mailboxes (``[[deliveries]]``): one row per key and target.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.store.types import UTCDateTime

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("id", Id, nullable=False, autoincrement=True),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("target", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("sent_digest", sa.String(64)),
        sa.Column("run_id", sa.BigInteger),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("error", sa.Text),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("sent_at", UTCDateTime),
        sa.CheckConstraint("state IN ('PENDING', 'SENDING', 'SENT', 'FAILED', 'UNCONFIRMED')",
                           name="ck_deliveries_state"),
        sa.CheckConstraint("kind IN ('report', 'update')", name="ck_deliveries_kind"),
        sa.PrimaryKeyConstraint("id", name="pk_deliveries"),
        sa.UniqueConstraint("key", "target", name="uq_deliveries_key_target"),
    )
    op.create_index("ix_deliveries_state", "deliveries", ["state"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_state", table_name="deliveries")
    op.drop_table("deliveries")
