"""Add query_handovers: where a backfill handed a query over to the live worker.

One row per (pipeline, query) that `cq backfill --handover` wrote up to `until_ts` (T2). The
worker starts such a query with its state rebuilt from the archive and emits only results
with _ts > until_ts (docs/backfill.md).

Revision ID: 0004
Revises: 0003
Create Date: 2025-03-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As in cq_service/catalog/models.py (kept here so the revision never changes with the models).
Name = sa.String(200)
When = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "query_handovers",
        sa.Column("pipeline", Name, primary_key=True),
        sa.Column("query", Name, primary_key=True),
        sa.Column("until_ts", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", When, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("query_handovers")
