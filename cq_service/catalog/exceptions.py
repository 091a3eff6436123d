"""Errors of the catalog package."""

from __future__ import annotations

from cq_service.errors import CQError

__all__ = ["CatalogError", "CatalogInputError"]


class CatalogError(CQError):
    """The catalog cannot be reached, is not migrated, or refused a change."""


class CatalogInputError(CatalogError):
    """A request the user got wrong: an unknown query, a bad status, a row that does not fit."""
