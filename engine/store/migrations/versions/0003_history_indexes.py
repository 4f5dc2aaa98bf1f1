"""Indexes for the run-history page: runs newest slot first, overall and per schedule.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Keyset pages on (scheduled_for DESC, id DESC): an index walk instead of sorting every run.
    op.create_index("ix_runs_scheduled_for_id", "runs", ["scheduled_for", "id"])
    # A schedule's runs by slot: its latest run (schedules list) and its filtered pages.
    op.create_index("ix_runs_schedule_slot", "runs", ["schedule_id", "scheduled_for"])


def downgrade() -> None:
    op.drop_index("ix_runs_schedule_slot", table_name="runs")
    op.drop_index("ix_runs_scheduled_for_id", table_name="runs")
