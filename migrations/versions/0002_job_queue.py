"""The procrastinate job queue schema (durable extraction jobs).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op
from procrastinate.schema import SchemaManager

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # procrastinate's own schema for the installed major version; upgrades of procrastinate
    # add their migration scripts as new revisions here.
    # exec_driver_sql runs the script through the driver's paramstyle: escape its % signs.
    op.get_bind().exec_driver_sql(SchemaManager.get_schema().replace("%", "%%"))


def downgrade() -> None:
    for table in ("procrastinate_events", "procrastinate_periodic_defers", "procrastinate_jobs",
                  "procrastinate_workers"):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
    op.execute("DROP TYPE IF EXISTS procrastinate_job_status CASCADE")
    op.execute("DROP TYPE IF EXISTS procrastinate_job_event_type CASCADE")
    op.execute("DROP TYPE IF EXISTS procrastinate_job_to_retry CASCADE")
    op.execute("DROP TYPE IF EXISTS procrastinate_job_to_retry_v1 CASCADE")
