"""Provider health and the runs that wait for a provider (SPEC §15.5: heals itself).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.store.types import UTCDateTime

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "provider_health",
        sa.Column("provider", sa.String(255), nullable=False),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("healthy", sa.Boolean, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("checked_at", UTCDateTime, nullable=False),
        sa.Column("since_at", UTCDateTime, nullable=False),
        sa.Column("next_check_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("provider", name="pk_provider_health"),
    )
    op.create_table(
        "run_waits",
        sa.Column("run_id", Id, nullable=False),
        sa.Column("provider", sa.String(255), nullable=False),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("error_code", sa.String(64), nullable=False),
        sa.Column("step", sa.String(64), nullable=False),
        sa.Column("degraded", sa.Boolean, nullable=False),
        sa.Column("since_at", UTCDateTime, nullable=False),
        sa.Column("recoveries", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("check_after", UTCDateTime),
        sa.Column("gave_up", sa.Text),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_waits_run_id_runs"),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_waits"),
    )
    op.create_index("ix_run_waits_check_after", "run_waits", ["check_after"])


def downgrade() -> None:
    op.drop_index("ix_run_waits_check_after", table_name="run_waits")
    op.drop_table("run_waits")
    op.drop_table("provider_health")
