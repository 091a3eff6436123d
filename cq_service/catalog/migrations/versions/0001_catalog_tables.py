"""Create the catalog tables.

streams, relation_rows, queries, deployments, adjustments, stats_snapshots and checkpoints.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As in cq_service/catalog/models.py (kept here so the revision never changes with the models).
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
Name = sa.String(200)
When = sa.DateTime(timezone=True)

TABLES = (
    "streams",
    "relation_rows",
    "queries",
    "deployments",
    "adjustments",
    "stats_snapshots",
    "checkpoints",
)


def _id() -> sa.Column:
    return sa.Column("id", Id, primary_key=True, autoincrement=True)


def upgrade() -> None:
    op.create_table(
        "streams",
        _id(),
        sa.Column("pipeline", Name, nullable=False),
        sa.Column("name", Name, nullable=False),
        sa.Column("is_relation", sa.Boolean(), nullable=False),
        sa.Column("schema", Json, nullable=False),
        sa.Column("source", Json, nullable=False),
        sa.Column("timestamp", Name, nullable=True),
        sa.Column("updated_at", When, nullable=False),
        sa.UniqueConstraint("pipeline", "name", name="uq_streams_pipeline_name"),
    )
    op.create_table(
        "relation_rows",
        _id(),
        sa.Column("relation", Name, nullable=False),
        sa.Column("pipeline", Name, nullable=True),
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.Column("op", sa.String(1), nullable=False),
        sa.Column("row", Json, nullable=False),
        sa.CheckConstraint("op IN ('+', '-')", name="ck_relation_rows_op"),
    )
    op.create_index("ix_relation_rows_relation_ts_id", "relation_rows", ["relation", "ts", "id"])
    op.create_index("ix_relation_rows_relation_id", "relation_rows", ["relation", "id"])
    op.create_table(
        "queries",
        _id(),
        sa.Column("pipeline", Name, nullable=False),
        sa.Column("name", Name, nullable=False),
        sa.Column("cql", sa.Text(), nullable=False),
        sa.Column("sink", Json, nullable=True),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("qos", Json, nullable=False),
        sa.Column("memory_budget", sa.BigInteger(), nullable=True),
        sa.Column("file_controls", Json, nullable=False),
        sa.Column("spec_hash", sa.String(128), nullable=False),
        sa.Column("start_after", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("updated_at", When, nullable=False),
        sa.UniqueConstraint("pipeline", "name", name="uq_queries_pipeline_name"),
        sa.CheckConstraint("status IN ('running', 'stopped', 'failed')", name="ck_queries_status"),
    )
    op.create_table(
        "deployments",
        _id(),
        sa.Column("pipeline", Name, nullable=False),
        sa.Column("spec_hash", sa.String(128), nullable=False),
        sa.Column("revision", sa.String(64), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", When, nullable=False),
        sa.CheckConstraint(
            "status IN ('applied', 'rejected', 'removed')", name="ck_deployments_status"
        ),
    )
    op.create_index("ix_deployments_pipeline", "deployments", ["pipeline"])
    op.create_table(
        "adjustments",
        _id(),
        sa.Column("pipeline", Name, nullable=False),
        sa.Column("query", Name, nullable=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("detail", Json, nullable=False),
        sa.Column("at", When, nullable=False),
    )
    op.create_index("ix_adjustments_pipeline", "adjustments", ["pipeline"])
    op.create_table(
        "stats_snapshots",
        _id(),
        sa.Column("at", When, nullable=False),
        sa.Column("pipeline", Name, nullable=True),
        sa.Column("data", Json, nullable=False),
    )
    op.create_index("ix_stats_snapshots_at", "stats_snapshots", ["at"])
    op.create_table(
        "checkpoints",
        sa.Column("key", Name, primary_key=True),
        sa.Column("frontier", sa.BigInteger(), nullable=True),
        sa.Column("offsets", Json, nullable=False),
        sa.Column("queries", Json, nullable=False),
        sa.Column("updated_at", When, nullable=False),
    )


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_table(table)
