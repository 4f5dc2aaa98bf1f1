"""The definition each schedule had at its last ``schedules apply``: what drift is measured against (SPEC §3).

Revision ID: 0007
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for schedules applied before this revision: their stored definition counts as the applied one.
    # A plain ADD COLUMN: a batch (copy-and-move) on SQLite would trip the runs' foreign keys.
    op.add_column("schedules", sa.Column("applied_definition", sa.JSON))


def downgrade() -> None:
    op.drop_column("schedules", "applied_definition")  # SQLite 3.35+ drops a column in place
