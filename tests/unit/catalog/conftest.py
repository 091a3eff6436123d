"""Factory fixtures for catalog tests: migrated SQLite catalogs in a temporary folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cq_service.catalog import Catalog


@pytest.fixture
def catalog_url(tmp_path: Path) -> str:
    """The URL of a SQLite catalog file that does not exist yet."""
    return f"sqlite:///{tmp_path / 'catalog.db'}"


@pytest.fixture
def make_catalog(catalog_url: str) -> Iterator[Callable[..., Catalog]]:
    """Open catalogs (default: at `catalog_url`; migrated to the newest revision unless
    `migrate=False`); all closed after."""
    opened: list[Catalog] = []

    def _make(url: str | None = None, *, migrate: bool = True) -> Catalog:
        catalog = Catalog(url or catalog_url)
        if migrate:
            catalog.upgrade()
        opened.append(catalog)
        return catalog

    yield _make
    for catalog in opened:
        catalog.close()


@pytest.fixture
def catalog(make_catalog: Callable[..., Catalog]) -> Catalog:
    """A fresh, migrated SQLite catalog."""
    return make_catalog()
