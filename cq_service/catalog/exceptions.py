"""Errors of the catalog package."""

from __future__ import annotations

from cq_service.errors import CQError, Outage, Unreachable

__all__ = ["CatalogError", "CatalogInputError", "CatalogUnavailable"]


class CatalogError(CQError):
    """The catalog cannot be reached, is not migrated, or refused a change."""


class CatalogInputError(CatalogError):
    """A request the user got wrong: an unknown query, a bad status, a row that does not fit."""


class CatalogUnavailable(CatalogError, Unreachable):
    """The catalog database cannot be reached now (refused, timed out, connection lost, shutting
    down): the call may succeed later. `outage` says which database and why."""

    def __init__(self, outage: Outage):
        Unreachable.__init__(self, outage)
