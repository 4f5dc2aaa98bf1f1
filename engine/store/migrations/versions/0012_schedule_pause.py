"""A schedule's pause (``schedules pause NAME --until T --reason R``, SPEC §18).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.store.types import UTCDateTime

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs: a batch (copy-and-move) on SQLite would trip the runs' foreign keys.
    op.add_column("schedules", sa.Column("paused_from", UTCDateTime))
    op.add_column("schedules", sa.Column("paused_until", UTCDateTime))
    op.add_column("schedules", sa.Column("pause_reason", sa.Text))


def downgrade() -> None:
    for column in ("pause_reason", "paused_until", "paused_from"):
        op.drop_column("schedules", column)  # SQLite 3.35+ drops a column in place
