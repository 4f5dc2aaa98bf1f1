"""Dependencies between schedules (SPEC §18): what a run waits for, and until when.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.store.types import UTCDateTime

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("upstream", sa.JSON))
    op.add_column("runs", sa.Column("upstream_until", UTCDateTime))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("upstream_until")
        batch.drop_column("upstream")
