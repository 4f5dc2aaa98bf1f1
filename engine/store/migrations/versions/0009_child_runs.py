"""Child runs (SPEC §17): ``runs.parent_id`` and the ``WAITING`` status.

Revision ID: 0009
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0007"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
BEFORE = ("PENDING", "QUEUED", "RUNNING", "RETRY_PENDING", "SUCCESS", "PARTIAL_SUCCESS",
          "FAILED", "MISSED", "SKIPPED", "MANUAL_REQUIRED", "CANCELLED")
AFTER = (*BEFORE, "WAITING")


def _in(values: tuple[str, ...]) -> str:
    return f"status IN ({', '.join(repr(v) for v in values)})"


def _replace_check(old: tuple[str, ...], new: tuple[str, ...]) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.drop_constraint("ck_runs_status", "runs", type_="check")
        op.create_check_constraint("ck_runs_status", "runs", _in(new))
        return
    # SQLite cannot alter a CHECK, and copying ``runs`` (Alembic's batch mode) would drop it under
    # the foreign keys of steps, attempts and artifacts. Changing a CHECK does not change the
    # file format, so the table's SQL is edited in place: SQLite's documented procedure
    # (https://www.sqlite.org/lang_altertable.html, "otherwise" section).
    version = int(bind.exec_driver_sql("PRAGMA schema_version").scalar() or 0)
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    found = bind.exec_driver_sql(
        "UPDATE sqlite_master SET sql = replace(sql, ?, ?) WHERE type = 'table' AND name = 'runs'",
        (_in(old), _in(new))).rowcount
    bind.exec_driver_sql(f"PRAGMA schema_version = {version + 1}")
    bind.exec_driver_sql("PRAGMA writable_schema = OFF")
    if found != 1:
        raise RuntimeError("runs has no status CHECK of the expected form; not migrating")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":  # SQLite adds a column with a reference, not a constraint
        op.execute("ALTER TABLE runs ADD COLUMN parent_id INTEGER "
                   "CONSTRAINT fk_runs_parent_id_runs REFERENCES runs (id)")
    else:
        op.add_column("runs", sa.Column("parent_id", Id, sa.ForeignKey("runs.id", name="fk_runs_parent_id_runs")))
    op.create_index("ix_runs_parent_id", "runs", ["parent_id"])
    _replace_check(BEFORE, AFTER)


def downgrade() -> None:
    _replace_check(AFTER, BEFORE)
    op.drop_index("ix_runs_parent_id", table_name="runs")
    op.drop_column("runs", "parent_id")
