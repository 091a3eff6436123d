"""Pipelines deployed through the API, in the catalog (migration 0005)."""

from __future__ import annotations

from tests.unit.catalog.checks import TABLES, tables


def test_0005_adds_stored_pipelines_and_keeps_the_data(make_catalog):
    catalog = make_catalog(migrate=False)
    catalog.upgrade("0004")
    catalog.set_handover("p", "q", 1234)
    catalog.upgrade("0005")
    assert tables(catalog) == TABLES
    catalog.store_pipeline("p", "p.yaml", "name: p\n", "h1")
    catalog.downgrade("0004")
    assert tables(catalog) == TABLES - {"stored_pipelines"}
    assert catalog.handover("p", "q") == 1234
    catalog.upgrade()
    assert catalog.stored_pipelines() == []


def test_the_revision_counts_new_texts_only(catalog):
    assert catalog.stored_pipeline("p") is None
    assert catalog.store_pipeline("p", "p.yaml", "one", "h1") == 1
    assert catalog.store_pipeline("p", "p.yaml", "one", "h1") == 1
    assert catalog.store_pipeline("p", "q.yaml", "two", "h2") == 2
    assert catalog.store_pipeline("a", "a.yaml", "three", "h3") == 1
    [a, p] = catalog.stored_pipelines()
    assert (a.pipeline, a.revision, a.text) == ("a", 1, "three")
    assert (p.pipeline, p.filename, p.text, p.spec_hash, p.revision) == (
        "p", "q.yaml", "two", "h2", 2
    )
    assert catalog.drop_stored_pipeline("p")
    assert not catalog.drop_stored_pipeline("p")
    assert catalog.store_pipeline("p", "p.yaml", "two", "h2") == 1
