"""SQLAlchemy Core table definitions: the schema the migrations build.

Statuses are text with CHECK constraints (a new state is not a migration of a
PostgreSQL ENUM). Instants are aware UTC. The constraints that make the
scheduler exactly-once live here: the partial unique index on
``(schedule_id, scheduled_for, trigger_type) WHERE revision = 1`` and the unique
``idempotency_key``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from engine.core import alerts, deliveries
from engine.core.backup_slots import BackupStatus
from engine.core.models import CLAIMABLE_STATUSES, RunStatus, RunTrigger, StepStatus
from engine.store.due import LIVE_SCHEDULE
from engine.store.types import UTCDateTime

metadata = MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})

# SQLite needs INTEGER (not BIGINT) for an autoincrementing rowid primary key.
Id = BigInteger().with_variant(Integer(), "sqlite")


def sql_string(value: str) -> str:
    """``value`` as an SQL string constant (quotes doubled), for SQL that must spell its values out."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """``column IN ('a', 'b')`` with the values as constants: the one IN-list renderer of the store."""
    return f"{column} IN ({', '.join(sql_string(v) for v in values)})"


# The claim's candidates, spelled as a literal so the partial index below serves the claim query
# (SQLite and PostgreSQL use a partial index only when the query repeats its predicate as such).
CLAIMABLE_RUN = sql_in("status", [s.value for s in CLAIMABLE_STATUSES])

schedules = Table(
    "schedules", metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("workflow", String(100), nullable=False),
    Column("project", String(64), nullable=False),
    Column("definition", JSON, nullable=False),
    Column("definition_hash", String(64), nullable=False),
    Column("applied_definition", JSON),  # as of the last ``schedules apply`` (drift, SPEC §3)
    Column("version", Integer, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("archived", Boolean, nullable=False, server_default=text("false")),
    Column("disabled_by_cli", Boolean, nullable=False, server_default=text("false")),
    Column("disabled_reason", Text),
    Column("disabled_at", UTCDateTime),
    Column("next_run_at", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("paused_from", UTCDateTime),  # ``schedules pause``: its slots in [from, until) are not run
    Column("paused_until", UTCDateTime),
    Column("pause_reason", Text),
    Index("ix_schedules_due", "next_run_at", sqlite_where=text(LIVE_SCHEDULE)),
    Index("uq_schedules_live_workflow_project", "workflow", "project", unique=True,
          sqlite_where=text("NOT archived")),
)

runs = Table(
    "runs", metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("schedule_id", Id, ForeignKey("schedules.id")),
    Column("workflow", String(100), nullable=False),
    Column("project", String(64), nullable=False),
    Column("trigger_type", String(16), nullable=False),
    Column("scheduled_for", UTCDateTime, nullable=False),
    Column("business_key", String(64), nullable=False),
    Column("base_key", String(255), nullable=False),
    Column("idempotency_key", String(255), nullable=False, unique=True),
    Column("revision", Integer, nullable=False),
    Column("status", String(20), nullable=False),
    Column("reason", String(32)),
    Column("priority", Integer, nullable=False),  # the trigger's (core.models.PRIORITY)
    # The schedule's (core.schedule_spec.SCHEDULE_RANK): set at creation, followed by runs not started (SPEC §18).
    Column("schedule_priority", Integer, nullable=False, server_default=text("20")),
    Column("not_before", UTCDateTime),
    Column("pinned", JSON, nullable=False),
    Column("attempt_count", Integer, nullable=False, server_default=text("0")),
    Column("max_attempts", Integer, nullable=False),
    Column("next_attempt_trigger", String(16)),
    Column("lease_owner", String(255)),
    Column("lease_until", UTCDateTime),
    Column("fence", BigInteger, nullable=False, server_default=text("0")),
    Column("cancel_requested", Boolean, nullable=False, server_default=text("false")),
    Column("max_runtime_s", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("claimed_at", UTCDateTime),
    Column("started_at", UTCDateTime),
    Column("completed_at", UTCDateTime),
    Column("error_code", String(64)),
    Column("error_message", Text),
    Column("parent_id", Id, ForeignKey("runs.id")),  # the run that fanned out into this one (SPEC §17)
    # [[schedule, business key], ...] a dependent run waits (or waited) for; ``upstream_until`` is set
    # only while it waits, WAITING, for them (SPEC §18, migration 0014).
    Column("upstream", JSON),
    Column("upstream_until", UTCDateTime),
    CheckConstraint(sql_in("status", [s.value for s in RunStatus]), name="status"),
    CheckConstraint(sql_in("trigger_type", [t.value for t in RunTrigger]), name="trigger_type"),
    CheckConstraint("revision >= 1", name="revision"),
    Index("ix_runs_claimable", "status", "not_before", "priority"),
    Index("ix_runs_schedule_status", "schedule_id", "status"),
    Index("ix_runs_base_key_status", "base_key", "status"),
    Index("ix_runs_scheduled_for_id", "scheduled_for", "id"),
    Index("ix_runs_schedule_slot", "schedule_id", "scheduled_for"),
    Index("ix_runs_parent_id", "parent_id"),
    Index("uq_runs_slot", "schedule_id", "scheduled_for", "trigger_type", unique=True,
          sqlite_where=text("revision = 1")),
)
# The claim walks claimable runs in its ORDER BY and stops at the first that qualifies, instead
# of reading and sorting the whole queue on every claim. Partial on PostgreSQL too (migration
# 0004); naming the postgresql dialect here would import it into every SQLite process.
Index("ix_runs_claim_order", runs.c.schedule_priority.desc(), runs.c.priority.desc(), runs.c.scheduled_for, runs.c.id,
      sqlite_where=text(CLAIMABLE_RUN))

steps = Table(
    "steps", metadata,
    Column("run_id", Id, ForeignKey("runs.id"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("name", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("output", JSON),
    Column("started_at", UTCDateTime),
    Column("finished_at", UTCDateTime),
    Column("error_code", String(64)),
    Column("error_message", Text),
    CheckConstraint(sql_in("status", [s.value for s in StepStatus]), name="status"),
)

attempts = Table(
    "attempts", metadata,
    Column("run_id", Id, ForeignKey("runs.id"), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("trigger", String(16), nullable=False),
    Column("from_step", String(64)),
    Column("outcome", String(20), nullable=False),
    Column("worker_id", String(255)),
    Column("fence", BigInteger),
    Column("started_at", UTCDateTime),
    Column("finished_at", UTCDateTime),
    Column("error_code", String(64)),
    Column("error_message", Text),
)

artifacts = Table(
    "artifacts", metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("run_id", Id, ForeignKey("runs.id"), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("step", String(64), nullable=False),
    Column("location", Text, nullable=False),
    Column("sha256", String(64)),
    Column("external_id", String(255)),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("run_id", "kind", "location"),
)

audit_events = Table(
    "audit_events", metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime, nullable=False),
    Column("actor", String(255), nullable=False),
    Column("action", String(64), nullable=False),
    Column("schedule_id", Id, ForeignKey("schedules.id")),
    Column("run_id", Id, ForeignKey("runs.id")),
    Column("before", JSON),
    Column("after", JSON),
    Column("reason", Text),
    Column("version", Integer),
    Index("ix_audit_events_schedule_action", "schedule_id", "action"),
)

instances = Table(
    "instances", metadata,
    Column("id", String(255), primary_key=True),
    Column("role", String(32), nullable=False),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("projects", JSON),
    Column("started_at", UTCDateTime, nullable=False),
    Column("last_seen_at", UTCDateTime, nullable=False),
)

# Marks (engine.store.marks): values a workflow records at instants of a named timeline (a line),
# once each. ``mark_lines.version`` is the line's compare-and-set token: a writer that decided on
# version N records only while the line is still at N, so two writers never both extend one line.
mark_lines = Table(
    "mark_lines", metadata,
    Column("line", String(255), primary_key=True),
    Column("version", Integer, nullable=False),
)

marks = Table(
    "marks", metadata,
    Column("line", String(255), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("value", JSON, nullable=False),
    Column("run_id", BigInteger),
    Column("created_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("line", "at"),
)

# One row per shared external rate limit (e.g. the Notion integration): the
# earliest instant the next request may be sent. Every worker on the store
# reserves its slot here, so N workers together keep the one limit.
rate_limits = Table(
    "rate_limits", metadata,
    Column("name", String(100), primary_key=True),
    Column("next_at", UTCDateTime, nullable=False),
)

# The configurations a full ``tick`` validated, by fingerprint (``engine.cli.fast_tick``): a tick
# whose inputs match one, with nothing due, answers without validating again. ``files`` is
# JSON text: the source files that validation loaded, with their sizes and mtimes. Only the
# newest few rows are kept.
config_fingerprints = Table(
    "config_fingerprints", metadata,
    Column("fingerprint", String(64), primary_key=True),
    Column("files", Text, nullable=False),
    Column("recorded_at", UTCDateTime, nullable=False),
)


# The alert outbox (SPEC §15.1): written in the transaction that causes the event, sent later
# by ``engine.operations.outbox_sender``. ``dedupe_key`` makes an event at most once per run or period;
# no foreign key to ``runs``, so a prune keeps the alerts of the runs it removes.
events = Table(
    "events", metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("dedupe_key", String(255), nullable=False, unique=True),
    Column("event", String(32), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("summary", Text, nullable=False),
    Column("schedule", String(100)),
    Column("run_id", BigInteger),
    Column("key", String(255)),
    Column("business_key", String(64)),
    Column("details", JSON),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("next_try_at", UTCDateTime),
    Column("delivered_at", UTCDateTime),
    Column("last_error", Text),
    CheckConstraint(sql_in("status", [s.value for s in alerts.EventStatus]), name="status"),
    Index("ix_events_status_next_try_at", "status", "next_try_at"),
    Index("ix_events_business_key_schedule", "business_key", "schedule"),
)

# Heals itself (SPEC §15.5, ``engine.store.health_rows``): each provider's latest probe, and the runs
# that wait for a provider (one row per run, written by the transaction that ends the run).
# ``run_waits.check_after`` is when the healer looks at a run again: an idle ``cycle`` asks only
# whether one has come (``engine.store.due.waits_due_query``).
provider_health = Table(
    "provider_health", metadata,
    Column("provider", String(255), primary_key=True),
    Column("label", Text, nullable=False),
    Column("healthy", Boolean, nullable=False),
    Column("detail", Text, nullable=False),
    Column("checked_at", UTCDateTime, nullable=False),
    Column("since_at", UTCDateTime, nullable=False),
    Column("next_check_at", UTCDateTime, nullable=False),
)

run_waits = Table(
    "run_waits", metadata,
    Column("run_id", Id, ForeignKey("runs.id"), primary_key=True),
    Column("provider", String(255), nullable=False),
    Column("label", Text, nullable=False),
    Column("error_code", String(64), nullable=False),
    Column("step", String(64), nullable=False),
    Column("degraded", Boolean, nullable=False),
    Column("since_at", UTCDateTime, nullable=False),
    Column("recoveries", Integer, nullable=False, server_default=text("0")),
    Column("check_after", UTCDateTime),
    Column("gave_up", Text),
    Index("ix_run_waits_check_after", "check_after"),
)

# Scheduled backups (``[store] backup``, ``engine.store.backup_rows``): one row per cron slot, inserted by the
# process that takes it (the primary key makes that one process however many serve or cycle), then marked
# verified or failed. ``cron`` and ``next_slot_at`` let an idle ``cycle`` see without croniter that a slot came.
backups_taken = Table(
    "backups", metadata,
    Column("slot_at", UTCDateTime, primary_key=True),
    Column("status", String(16), nullable=False),
    Column("path", Text, nullable=False),
    Column("cron", Text, nullable=False),
    Column("next_slot_at", UTCDateTime, nullable=False),
    Column("claimed_at", UTCDateTime, nullable=False),
    Column("claimed_by", String(255), nullable=False),
    Column("finished_at", UTCDateTime),
    Column("detail", Text),
    Column("size", BigInteger),  # a verified copy's size and sha256 when it was verified (migration 0015)
    Column("sha256", String(64)),
    CheckConstraint(sql_in("status", [s.value for s in BackupStatus]), name="status"),
)

# The at-most-once outbox of messages to the outside (``engine.core.deliveries``, ``engine.store.delivery_rows``):
# one row per report key and target (a ``[[deliveries]]`` variable's name, never its URL), made SENDING and
# committed before each send. Kept for ever, like marks: a row is what stops a report from being sent twice.
deliveries_sent = Table(
    "deliveries", metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("key", String(255), nullable=False),
    Column("target", String(128), nullable=False),
    Column("state", String(16), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("digest", String(64), nullable=False),
    Column("sent_digest", String(64)),
    Column("run_id", BigInteger),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("error", Text),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("sent_at", UTCDateTime),
    UniqueConstraint("key", "target"),
    CheckConstraint(sql_in("state", [s.value for s in deliveries.DeliveryState]), name="state"),
    CheckConstraint(sql_in("kind", [k.value for k in deliveries.MessageKind]), name="kind"),
    Index("ix_deliveries_state", "state"),
)

# The partial indexes' condition on PostgreSQL, the same as their ``sqlite_where``. It is
# attached by ``postgresql_options()`` when a PostgreSQL engine is made
# (``database.create_db_engine``), not written as ``postgresql_where=`` above: that keyword makes
# SQLAlchemy import its whole PostgreSQL dialect to check it (~20 ms), in every SQLite process
# too, such as the ``tick`` a cron line starts every minute (SPEC §11).
POSTGRESQL_WHERE = {"ix_schedules_due": LIVE_SCHEDULE, "uq_schedules_live_workflow_project": "NOT archived",
                    "uq_runs_slot": "revision = 1"}


def postgresql_options() -> None:
    """Give the partial indexes their ``postgresql_where`` (idempotent; loads the PostgreSQL dialect)."""
    for table in metadata.tables.values():
        for index in table.indexes:
            where = POSTGRESQL_WHERE.get(str(index.name))
            if where is not None and index.dialect_options["postgresql"].get("where") is None:
                index.dialect_kwargs["postgresql_where"] = text(where)
