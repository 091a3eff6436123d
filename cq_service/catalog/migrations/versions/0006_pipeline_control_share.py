"""Add pipeline_controls.share: chain_share's share of FIFO steps (0 to 1), chosen at run time.

NULL unless the control's scheduler is chain_share (the repository checks that pairing; the
CHECK here keeps the value in [0, 1] past it). SQLite recreates the table from the definition
below rather than by reflection, so the latency bound's CHECK is kept.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As in cq_service/catalog/models.py (kept here so the revision never changes with the models).
Name = sa.String(200)
When = sa.DateTime(timezone=True)
SHARE_CHECK = "share IS NULL OR (share >= 0 AND share <= 1)"
SHARE_CHECK_NAME = "ck_pipeline_controls_share"


def _controls(*extra: sa.SchemaItem) -> sa.Table:
    """pipeline_controls as revision 0002 created it, plus `extra`."""
    return sa.Table(
        "pipeline_controls",
        sa.MetaData(),
        sa.Column("pipeline", Name, primary_key=True),
        sa.Column("scheduler", sa.String(32), nullable=True),
        sa.Column("latency_bound_ms", sa.Float(), nullable=True),
        sa.Column("updated_at", When, nullable=False),
        sa.CheckConstraint(
            "latency_bound_ms IS NULL OR latency_bound_ms > 0",
            name="ck_pipeline_controls_latency_bound_ms",
        ),
        *extra,
    )


def upgrade() -> None:
    with op.batch_alter_table("pipeline_controls", copy_from=_controls()) as batch:
        batch.add_column(sa.Column("share", sa.Float(), nullable=True))
        batch.create_check_constraint(SHARE_CHECK_NAME, SHARE_CHECK)


def downgrade() -> None:
    new = _controls(
        sa.Column("share", sa.Float(), nullable=True),
        sa.CheckConstraint(SHARE_CHECK, name=SHARE_CHECK_NAME),
    )
    with op.batch_alter_table("pipeline_controls", copy_from=new) as batch:
        batch.drop_constraint(SHARE_CHECK_NAME, type_="check")
        batch.drop_column("share")
