"""A verified backup's size and sha256, recorded when it was verified, so doctor can tell it is still that file.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("backups", sa.Column("size", sa.BigInteger))
    op.add_column("backups", sa.Column("sha256", sa.String(64)))


def downgrade() -> None:
    with op.batch_alter_table("backups") as batch:
        batch.drop_column("sha256")
        batch.drop_column("size")
