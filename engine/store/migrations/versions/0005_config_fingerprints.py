"""The configurations a full ``tick`` validated, for the nothing-due fast path (engine.cli.fast_tick).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.store.types import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "config_fingerprints",
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("files", sa.Text, nullable=False),
        sa.Column("recorded_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("fingerprint", name="pk_config_fingerprints"),
    )


def downgrade() -> None:
    op.drop_table("config_fingerprints")
