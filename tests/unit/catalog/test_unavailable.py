"""A catalog database that cannot be reached is `CatalogUnavailable` (retried by the worker),
not a mistake in the request; the catalog keeps the outage until a call succeeds."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cq_service.catalog import Catalog, CatalogError, CatalogUnavailable
from cq_service.catalog.database import unreachable_reason
from cq_service.errors import Unreachable


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_connection_is_unavailable() -> None:
    port = closed_port()
    catalog = Catalog(f"postgresql+psycopg://cq:secret@127.0.0.1:{port}/cq")
    assert catalog.outage is None
    with pytest.raises(CatalogUnavailable) as away:
        catalog.ping()
    assert isinstance(away.value, CatalogError) and isinstance(away.value, Unreachable)
    shown = f"catalog postgresql+psycopg://cq:***@127.0.0.1:{port}/cq"
    assert (away.value.outage.dependency, away.value.outage.reason) == (shown, "connection refused")
    assert catalog.outage == away.value.outage
    with pytest.raises(CatalogUnavailable) as again:
        catalog.queries()
    assert again.value.outage.since == away.value.outage.since  # the same outage
    assert "secret" not in str(again.value)
    catalog.close()


def test_a_catalog_not_migrated_is_an_error_not_an_outage(tmp_path: Path) -> None:
    catalog = Catalog(f"sqlite:///{tmp_path / 'c.db'}")
    with pytest.raises(CatalogError, match="is not migrated") as error:
        catalog.queries()
    assert not isinstance(error.value, CatalogUnavailable)
    assert catalog.outage is None


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ('connection to server at "db", port 5432 failed: Connection refused', "connection refused"),
        ("connection timeout expired", "connection timed out"),
        ("FATAL:  the database system is shutting down", "the database is shutting down"),
        ("terminating connection due to administrator command", "the connection was closed by the server"),
        ("something else entirely", "something else entirely"),
    ],
)
def test_driver_messages_in_plain_words(message: str, reason: str) -> None:
    assert unreachable_reason(message) == reason
