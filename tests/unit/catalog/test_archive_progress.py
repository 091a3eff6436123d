"""The archive's progress in the catalog: one row per pipeline and stream, replaced at once."""

from __future__ import annotations

import pytest

from cq_service.batch.layout import archive_boundary
from cq_service.catalog import ArchiveState, Catalog, CatalogInputError


def test_nothing_archived_yet(catalog: Catalog):
    assert catalog.archive_state("p", "S") is None
    assert catalog.archive_states("p") == []
    assert archive_boundary(catalog, "p", "S") is None


def test_a_state_comes_back_equal_and_is_replaced(catalog: Catalog):
    first = ArchiveState(
        "p", "S", "kafka", 1, {0: 10, 1: 7}, {0: 1_000, 1: 900}, next_position=17,
        boundary=890, rows=17, dead_letters=1,
    )
    catalog.save_archive_state(first)
    got = catalog.archive_state("p", "S")
    assert got is not None and got.updated_at is not None
    assert got == ArchiveState(**{**first.__dict__, "updated_at": got.updated_at})
    assert archive_boundary(catalog, "p", "S") == 890
    second = ArchiveState("p", "S", "kafka", 2, {0: 12, 1: 7}, {0: 1_100, 1: 900}, boundary=890)
    catalog.save_archive_state(second)
    assert catalog.archive_state("p", "S").offsets == {0: 12, 1: 7}
    assert catalog.archive_state("p", "S").run == 2
    catalog.save_archive_state(ArchiveState("p", "F", "file", 1, {0: 3}, {0: 5}, file_size=40,
                                            file_mtime_ns=123, boundary=5))
    assert [s.stream for s in catalog.archive_states("p")] == ["F", "S"]
    assert catalog.archive_states("other") == []


def test_a_run_number_below_one_is_refused(catalog: Catalog):
    with pytest.raises(CatalogInputError, match="run must be >= 1"):
        catalog.save_archive_state(ArchiveState("p", "S", "kafka", 0))
