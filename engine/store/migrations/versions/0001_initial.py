"""Initial schema: schedules, runs, steps, attempts, artifacts, audit events, instances.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.store.types import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
RUN_STATUSES = ("PENDING", "QUEUED", "RUNNING", "RETRY_PENDING", "SUCCESS", "PARTIAL_SUCCESS",
                "FAILED", "MISSED", "SKIPPED", "MANUAL_REQUIRED", "CANCELLED")
STEP_STATUSES = ("PENDING", "RUNNING", "SUCCESS", "FAILED", "SKIPPED")
TRIGGERS = ("SCHEDULED", "MANUAL", "BACKFILL")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("workflow", sa.String(100), nullable=False),
        sa.Column("project", sa.String(64), nullable=False),
        sa.Column("definition", sa.JSON, nullable=False),
        sa.Column("definition_hash", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("archived", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("disabled_by_cli", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("disabled_reason", sa.Text),
        sa.Column("disabled_at", UTCDateTime),
        sa.Column("next_run_at", UTCDateTime),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_schedules"),
        sa.UniqueConstraint("name", name="uq_schedules_name"),
    )
    op.create_index("ix_schedules_due", "schedules", ["next_run_at"],
                    sqlite_where=sa.text("enabled AND NOT archived"),
                    postgresql_where=sa.text("enabled AND NOT archived"))
    op.create_index("uq_schedules_live_workflow_project", "schedules", ["workflow", "project"], unique=True,
                    sqlite_where=sa.text("NOT archived"), postgresql_where=sa.text("NOT archived"))

    op.create_table(
        "runs",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("schedule_id", Id),
        sa.Column("workflow", sa.String(100), nullable=False),
        sa.Column("project", sa.String(64), nullable=False),
        sa.Column("trigger_type", sa.String(16), nullable=False),
        sa.Column("scheduled_for", UTCDateTime, nullable=False),
        sa.Column("business_key", sa.String(64), nullable=False),
        sa.Column("base_key", sa.String(255), nullable=False),
        sa.Column("idempotency_key", sa.String(255), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("reason", sa.String(32)),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("not_before", UTCDateTime),
        sa.Column("pinned", sa.JSON, nullable=False),
        sa.Column("attempt_count", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_trigger", sa.String(16)),
        sa.Column("resume_step", sa.String(64)),
        sa.Column("lease_owner", sa.String(255)),
        sa.Column("lease_until", UTCDateTime),
        sa.Column("fence", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("max_runtime_s", sa.Integer, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("claimed_at", UTCDateTime),
        sa.Column("started_at", UTCDateTime),
        sa.Column("completed_at", UTCDateTime),
        sa.Column("error_code", sa.String(64)),
        sa.Column("error_message", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.ForeignKeyConstraint(["schedule_id"], ["schedules.id"], name="fk_runs_schedule_id_schedules"),
        sa.UniqueConstraint("idempotency_key", name="uq_runs_idempotency_key"),
        sa.CheckConstraint(_in("status", RUN_STATUSES), name="ck_runs_status"),
        sa.CheckConstraint(_in("trigger_type", TRIGGERS), name="ck_runs_trigger_type"),
        sa.CheckConstraint("revision >= 1", name="ck_runs_revision"),
    )
    op.create_index("ix_runs_claimable", "runs", ["status", "not_before", "priority"])
    op.create_index("ix_runs_schedule_status", "runs", ["schedule_id", "status"])
    op.create_index("ix_runs_base_key_status", "runs", ["base_key", "status"])
    op.create_index("uq_runs_slot", "runs", ["schedule_id", "scheduled_for", "trigger_type"], unique=True,
                    sqlite_where=sa.text("revision = 1"), postgresql_where=sa.text("revision = 1"))

    op.create_table(
        "steps",
        sa.Column("run_id", Id, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("output", sa.JSON),
        sa.Column("started_at", UTCDateTime),
        sa.Column("finished_at", UTCDateTime),
        sa.Column("error_code", sa.String(64)),
        sa.Column("error_message", sa.Text),
        sa.PrimaryKeyConstraint("run_id", "position", name="pk_steps"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_steps_run_id_runs"),
        sa.CheckConstraint(_in("status", STEP_STATUSES), name="ck_steps_status"),
    )
    op.create_table(
        "attempts",
        sa.Column("run_id", Id, nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("from_step", sa.String(64)),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("worker_id", sa.String(255)),
        sa.Column("fence", sa.BigInteger),
        sa.Column("started_at", UTCDateTime),
        sa.Column("finished_at", UTCDateTime),
        sa.Column("error_code", sa.String(64)),
        sa.Column("error_message", sa.Text),
        sa.PrimaryKeyConstraint("run_id", "number", name="pk_attempts"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_attempts_run_id_runs"),
    )
    op.create_table(
        "artifacts",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("run_id", Id, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("step", sa.String(64), nullable=False),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("sha256", sa.String(64)),
        sa.Column("external_id", sa.String(255)),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_artifacts"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_artifacts_run_id_runs"),
        sa.UniqueConstraint("run_id", "kind", "location", name="uq_artifacts_run_id_kind_location"),
    )
    op.create_table(
        "audit_events",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("at", UTCDateTime, nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("schedule_id", Id),
        sa.Column("run_id", Id),
        sa.Column("before", sa.JSON),
        sa.Column("after", sa.JSON),
        sa.Column("reason", sa.Text),
        sa.Column("version", sa.Integer),
        sa.PrimaryKeyConstraint("id", name="pk_audit_events"),
        sa.ForeignKeyConstraint(["schedule_id"], ["schedules.id"], name="fk_audit_events_schedule_id_schedules"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_audit_events_run_id_runs"),
    )
    op.create_index("ix_audit_events_schedule_action", "audit_events", ["schedule_id", "action"])
    op.create_table(
        "instances",
        sa.Column("id", sa.String(255), nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("projects", sa.JSON),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("last_seen_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_instances"),
    )


def downgrade() -> None:
    for table in ("instances", "audit_events", "artifacts", "attempts", "steps", "runs", "schedules"):
        op.drop_table(table)
