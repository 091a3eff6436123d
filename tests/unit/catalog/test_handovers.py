"""Backfill handovers in the catalog (migration 0004)."""

from __future__ import annotations

from tests.unit.catalog.checks import TABLES, tables


def test_0004_adds_query_handovers_and_keeps_the_data(make_catalog):
    catalog = make_catalog(migrate=False)
    catalog.upgrade("0003")
    catalog.upsert_query("p", "q", "SELECT * FROM S", None, 2.0, "h", "running")
    catalog.upgrade("0004")
    assert tables(catalog) == TABLES - {"stored_pipelines"}
    catalog.set_handover("p", "q", 1234)
    catalog.downgrade("0003")
    assert tables(catalog) == TABLES - {"query_handovers", "stored_pipelines"}
    assert catalog.query("p", "q").weight == 2.0
    catalog.upgrade()
    assert catalog.handover("p", "q") is None


def test_a_handover_is_set_replaced_and_cleared(catalog):
    assert catalog.handover("p", "q") is None
    catalog.set_handover("p", "q", 10)
    catalog.set_handover("p", "q", 20)
    assert catalog.handover("p", "q") == 20
    assert catalog.handover("p", "other") is None
    assert catalog.clear_handover("p", "q")
    assert not catalog.clear_handover("p", "q")
    assert catalog.handover("p", "q") is None
