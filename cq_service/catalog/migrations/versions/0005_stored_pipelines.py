"""Add stored_pipelines: pipelines deployed through the API (`cq deploy`, `POST /pipelines`).

One row per pipeline: its text, the SHA-256 of that text, a revision counted up each time the
text changes, and the file name it was sent as (relative paths in it are taken from the
pipelines folder). The worker deploys them at start-up and whenever they change, exactly like
the files of the pipelines folder (docs/service.md, "Deploying").

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As in cq_service/catalog/models.py (kept here so the revision never changes with the models).
Name = sa.String(200)
When = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "stored_pipelines",
        sa.Column("pipeline", Name, primary_key=True),
        sa.Column("filename", Name, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("spec_hash", sa.String(128), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", When, nullable=False),
        sa.CheckConstraint("revision >= 1", name="ck_stored_pipelines_revision"),
    )


def downgrade() -> None:
    op.drop_table("stored_pipelines")
