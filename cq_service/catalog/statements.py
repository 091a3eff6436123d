"""What the catalog's mixins share: the transaction they run in, an upsert that works on
PostgreSQL and SQLite, and times read back as UTC."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from cq_service.catalog import models as m

__all__ = ["Transactions", "aware", "upsert"]


class Transactions(Protocol):
    """A catalog's own transactions (`Catalog._tx`), which its mixins run in."""

    def _tx(self) -> AbstractContextManager[Session]: ...


def upsert(
    s: Session, model: type[m.Base], values: dict[str, Any], key: str | Sequence[str]
) -> Any:
    """Insert `values`, or update the row with the same primary `key` (atomically)."""
    insert = postgresql.insert if s.bind.dialect.name == "postgresql" else sqlite.insert
    keys = [key] if isinstance(key, str) else list(key)
    return (
        insert(model)
        .values(values)
        .on_conflict_do_update(
            index_elements=keys, set_={k: v for k, v in values.items() if k not in keys}
        )
    )


def aware(at: datetime) -> datetime:
    """SQLite drops the time zone of stored times: they are UTC."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
