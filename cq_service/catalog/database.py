"""Engines from catalog URLs, and the Alembic migrations that create and change the schema.

A catalog URL is a SQLAlchemy URL: ``sqlite:///path/to/catalog.db`` (embedded, the default) or
``postgresql+psycopg://user:password@host:5432/db``. A bare path is taken as a SQLite file, and
``postgresql://`` / ``postgres://`` use psycopg 3. `default_url()` is ``$CQ_CATALOG`` if set,
else ``sqlite:///.cq/catalog.db`` (relative to the working directory).

The migrations are package data, in ``cq_service/catalog/migrations/`` (so a wheel carries them),
and run programmatically: `upgrade(engine)` / `downgrade(engine, revision)`; no alembic.ini is
needed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from cq_service.catalog.exceptions import CatalogError

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic is imported where it is used: it takes a third of a second, and only migrations need it.

__all__ = [
    "CONNECT_TIMEOUT_S",
    "DEFAULT_SQLITE_PATH",
    "ENV_VAR",
    "MIGRATIONS",
    "alembic_config",
    "current_revision",
    "default_url",
    "describe",
    "downgrade",
    "head_revision",
    "make_engine",
    "normalize_url",
    "shown_url",
    "unreachable_reason",
    "upgrade",
]

ENV_VAR = "CQ_CATALOG"
DEFAULT_SQLITE_PATH = ".cq/catalog.db"
CONNECT_TIMEOUT_S = 2.0  # PostgreSQL: connecting, and a request unanswered on a connection
MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def default_url(environ: Mapping[str, str] | None = None) -> str:
    """``$CQ_CATALOG`` if set and not empty, else the embedded SQLite file ``.cq/catalog.db``."""
    env = os.environ if environ is None else environ
    return env.get(ENV_VAR) or f"sqlite:///{DEFAULT_SQLITE_PATH}"


def normalize_url(url: str) -> URL:
    """`url` as a SQLAlchemy URL: a bare path is a SQLite file; PostgreSQL uses psycopg 3."""
    text = url.strip()
    if not text:
        raise CatalogError("the catalog URL is empty")
    if "://" not in text:
        return URL.create("sqlite", database=text)
    try:
        parsed = make_url(text)
    except ArgumentError as e:
        raise CatalogError(f"not a catalog URL: {text!r} ({e})") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise CatalogError(
            f"unsupported catalog database {parsed.get_backend_name()!r} in "
            f"{shown_url(text)} (use sqlite:///PATH or postgresql+psycopg://…)"
        )
    return parsed


def shown_url(url: str | URL) -> str:
    """`url` with any password hidden, for messages."""
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except ArgumentError:
        return str(url)
    return parsed.render_as_string(hide_password=True)


def _sqlite_file(url: URL) -> Path | None:
    db = url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


def make_engine(url: str, *, create: bool = True, timeout: float = CONNECT_TIMEOUT_S) -> Engine:
    """An engine for the catalog at `url`.

    For a SQLite file, `create` makes its folder if missing (False: a missing file is an
    error rather than a new, empty catalog). SQLite connections wait up to 10 s for a lock
    and use write-ahead logging, so a worker can read while `cq relation` writes.

    PostgreSQL connections are checked before use (a server restarted meanwhile is
    reconnected to), give up connecting after `timeout` seconds, and drop a connection whose
    requests go unacknowledged that long (a server gone without closing it), so a call to a
    database that went away fails within seconds rather than hanging."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() != "sqlite":
        seconds = max(1, round(timeout))
        return create_engine(
            parsed,
            pool_pre_ping=True,
            connect_args={"connect_timeout": seconds, "tcp_user_timeout": seconds * 1000},
        )
    path = _sqlite_file(parsed)
    if path is not None:
        if not path.exists() and not create:
            raise CatalogError(f"no catalog at {shown_url(parsed)} (the file does not exist)")
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, connect_args={"timeout": 10})
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=10000")
    finally:
        cursor.close()


def alembic_config() -> Config:
    """An Alembic configuration for the migrations folder (no ini file)."""
    from alembic.config import Config

    if not (MIGRATIONS / "env.py").is_file():
        raise CatalogError(f"the catalog migrations are missing (looked in {MIGRATIONS})")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def _run(engine: Engine, action: str, revision: str) -> None:
    from alembic import command
    from alembic.util import CommandError

    config = alembic_config()
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            getattr(command, action)(config, revision)
    except (CommandError, SQLAlchemyError) as e:
        raise CatalogError(
            f"cannot {action} the catalog at {shown_url(engine.url)} to {revision!r}: {describe(e)}"
        ) from e


def describe(error: Exception) -> str:
    """The first line of a database error's own message (without SQLAlchemy's decorations)."""
    orig = getattr(error, "orig", None)
    text = str(orig if orig is not None else error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def unreachable_reason(message: str) -> str:
    """A database driver's message about a connection, in a few plain words."""
    lowered = message.lower()
    for phrase, reason in (
        ("connection refused", "connection refused"),
        ("timeout expired", "connection timed out"),
        ("timed out", "connection timed out"),
        ("shutting down", "the database is shutting down"),
        ("starting up", "the database is starting up"),
        ("terminating connection", "the connection was closed by the server"),
        ("server closed the connection", "the connection was closed by the server"),
        ("connection is closed", "the connection was closed"),
        ("could not translate host name", "cannot resolve the host"),
        ("database is locked", "the database is locked"),
    ):
        if phrase in lowered:
            return reason
    return message


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the catalog up to `revision` (default: the newest)."""
    _run(engine, "upgrade", revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Migrate the catalog down to `revision` (default ``base``: no catalog tables left)."""
    _run(engine, "downgrade", revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the catalog is at (None: not migrated)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    """The newest revision in the migrations folder."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()
