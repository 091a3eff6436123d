"""Add pipeline_controls: a deployment's scheduler chosen at run time.

One row per pipeline that has a control set through the API; it outlives redeploys and
restarts. NULL scheduler: the worker's configuration or the pipeline file decides.

Revision ID: 0002
Revises: 0001
Create Date: 2025-02-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As in cq_service/catalog/models.py (kept here so the revision never changes with the models).
Name = sa.String(200)
When = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "pipeline_controls",
        sa.Column("pipeline", Name, primary_key=True),
        sa.Column("scheduler", sa.String(32), nullable=True),
        sa.Column("latency_bound_ms", sa.Float(), nullable=True),
        sa.Column("updated_at", When, nullable=False),
        sa.CheckConstraint(
            "latency_bound_ms IS NULL OR latency_bound_ms > 0",
            name="ck_pipeline_controls_latency_bound_ms",
        ),
    )


def downgrade() -> None:
    op.drop_table("pipeline_controls")
