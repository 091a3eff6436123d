"""Alembic environment of the cq-service catalog.

`cq_service.catalog.database` runs the migrations programmatically and hands over an open
connection (``config.attributes["connection"]``); the ``alembic`` command line works too, with
``-c cq_service/catalog/migrations/alembic.ini`` and the URL in ``$CQ_CATALOG`` (or ``-x url=…``). SQLite gets batch
mode, so table changes in later revisions are made by copying the table.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from cq_service.catalog.database import default_url, make_engine
from cq_service.catalog.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    return context.get_x_argument(as_dictionary=True).get("url") or default_url()


def _migrate(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    """Print the SQL instead of running it (``alembic upgrade head --sql``)."""
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=_url().startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _migrate(connection)
        return
    engine = make_engine(_url())
    try:
        with engine.begin() as own:
            _migrate(own)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
