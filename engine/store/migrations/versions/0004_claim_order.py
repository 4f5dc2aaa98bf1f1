"""The claim's order as a partial index: a claim costs the same with 10 or 10,000 runs queued.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

CLAIMABLE_RUN = "status IN ('QUEUED', 'RETRY_PENDING')"  # engine.store.tables.CLAIMABLE_RUN as of this revision


def upgrade() -> None:
    op.create_index("ix_runs_claim_order", "runs", [sa.column("priority").desc(), "scheduled_for", "id"],
                    sqlite_where=sa.text(CLAIMABLE_RUN), postgresql_where=sa.text(CLAIMABLE_RUN))


def downgrade() -> None:
    op.drop_index("ix_runs_claim_order", table_name="runs")
