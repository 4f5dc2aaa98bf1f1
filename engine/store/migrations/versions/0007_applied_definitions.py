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
    with op.batch_alter_table("schedules") as batch:
        batch.add_column(sa.Column("applied_definition", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("applied_definition")
