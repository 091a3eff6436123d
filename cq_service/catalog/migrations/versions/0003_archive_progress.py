"""Add archive_progress: how far `cq archive` has copied each stream of a pipeline.

One row per (pipeline, stream), replaced in one transaction after a run's files are in place.
`run` numbers the committed runs (file names carry it, so a crashed run's files are known);
`offsets` maps a Kafka partition (a file: 0) to the next offset (a file: the last record number)
to archive, `max_ts` each partition's largest archived _ts. `boundary` is the largest _ts up to
which the archive is complete (NULL: none yet). A file source also keeps the size and mtime it
had.

Revision ID: 0003
Revises: 0002
Create Date: 2025-03-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As in cq_service/catalog/models.py (kept here so the revision never changes with the models).
Name = sa.String(200)
When = sa.DateTime(timezone=True)
Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "archive_progress",
        sa.Column("pipeline", Name, primary_key=True),
        sa.Column("stream", Name, primary_key=True),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("run", sa.BigInteger(), nullable=False),
        sa.Column("offsets", Json, nullable=False),
        sa.Column("max_ts", Json, nullable=False),
        sa.Column("next_position", sa.BigInteger(), nullable=False),
        sa.Column("boundary", sa.BigInteger(), nullable=True),
        sa.Column("file_size", sa.BigInteger(), nullable=True),
        sa.Column("file_mtime_ns", sa.BigInteger(), nullable=True),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("dead_letters", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", When, nullable=False),
        sa.CheckConstraint("run >= 1", name="ck_archive_progress_run"),
    )


def downgrade() -> None:
    op.drop_table("archive_progress")
