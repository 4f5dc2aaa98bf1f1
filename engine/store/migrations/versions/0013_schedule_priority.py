"""A schedule's priority on its runs, first in the claim's order (SPEC §18).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

CLAIMABLE_RUN = "status IN ('QUEUED', 'RETRY_PENDING')"  # engine.store.tables.CLAIMABLE_RUN as of this revision
NORMAL = 20  # engine.core.schedule_spec.SCHEDULE_RANK[NORMAL]: every run made before priorities existed


def _claim_order(*columns: str | sa.ColumnElement[object]) -> None:
    op.drop_index("ix_runs_claim_order", table_name="runs")
    op.create_index("ix_runs_claim_order", "runs", list(columns),
                    sqlite_where=sa.text(CLAIMABLE_RUN), postgresql_where=sa.text(CLAIMABLE_RUN))


def upgrade() -> None:
    op.add_column("runs", sa.Column("schedule_priority", sa.Integer, nullable=False,
                                    server_default=sa.text(str(NORMAL))))
    _claim_order(sa.column("schedule_priority").desc(), sa.column("priority").desc(), "scheduled_for", "id")


def downgrade() -> None:
    _claim_order(sa.column("priority").desc(), "scheduled_for", "id")
    op.drop_column("runs", "schedule_priority")
