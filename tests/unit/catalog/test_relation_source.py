"""The catalog relation source: finite and live reads, ordering, typing, dead letters."""

from __future__ import annotations

import pytest

import cq_service.catalog.relation_source as relation_source
from cq_service.catalog import Catalog, CatalogRelationReader
from cq_service.io import SOURCES, SourceError, open_source
from cq_service.spec.model import FieldSpec, SourceSpec, StreamSpec
from cq_service.types import DataType


def relation(
    url: str,
    schema: dict[str, str],
    *,
    name: str = "Domains",
    stored_as: str | None = None,
    pipeline: str | None = "web",
    timestamp: str | None = None,
    is_relation: bool = True,
) -> StreamSpec:
    fields = tuple(FieldSpec(c, DataType(t)) for c, t in schema.items())
    options = {"name": stored_as or name, "url": url, "pipeline": pipeline}
    return StreamSpec(name, fields, SourceSpec("catalog", options=options), timestamp, is_relation)


def read_all(reader) -> list[tuple]:
    """(ts, op, record, row) of every element, chunk after chunk, until the reader ends."""
    out = []
    for chunk in reader:
        cols = [c.to_pylist() for c in chunk.columns]
        out.extend(
            (t, o, r, row)
            for t, o, r, row in zip(
                chunk.ts.tolist(), chunk.ops.tolist(), chunk.record.tolist(), zip(*cols)
            )
        )
    return out


def test_the_source_is_registered_by_importing_the_package():
    assert SOURCES["catalog"] is CatalogRelationReader
    assert CatalogRelationReader.follows_clock is True


def test_finite_read_in_time_order_with_types(catalog: Catalog, catalog_url: str):
    ids = []
    for ts, op, row in [
        (5, "+", {"domain": "b.com", "rank": "2", "ok": True}),
        (1, "+", {"domain": "a.com", "rank": 1, "ok": "yes"}),
        (5, "-", {"domain": "a.com", "rank": 1.0, "ok": 1}),
        (3, "+", {"domain": "c.com", "extra": "ignored"}),
    ]:
        catalog.insert_relation_rows("Domains", [(ts, op, row)])
        ids.append(catalog.last_relation_row_id("Domains"))
    spec = relation(catalog_url, {"domain": "string", "rank": "int", "ok": "bool"})
    with open_source(spec, "ms", batch_rows=2) as reader:  # several chunks
        got = read_all(reader)
    assert got == [
        (1, 1, ids[1], ("a.com", 1, True)),
        (3, 1, ids[3], ("c.com", None, None)),
        (5, 1, ids[0], ("b.com", 2, True)),
        (5, -1, ids[2], ("a.com", 1, True)),
    ]


def test_a_pipeline_sees_shared_rows_and_its_own(catalog: Catalog, catalog_url: str):
    catalog.insert_relation_rows("Dom", [(1, "+", {"d": "shared"})])
    catalog.insert_relation_rows("Dom", [(2, "+", {"d": "mine"})], pipeline="web")
    catalog.insert_relation_rows("Dom", [(3, "+", {"d": "theirs"})], pipeline="other")
    catalog.insert_relation_rows("Other", [(0, "+", {"d": "elsewhere"})])
    spec = relation(catalog_url, {"d": "string"}, stored_as="Dom")
    with open_source(spec, "ms") as reader:
        assert [row for *_, row in read_all(reader)] == [("shared",), ("mine",)]


def test_the_timestamp_column_takes_the_stored_ts(catalog: Catalog, catalog_url: str):
    catalog.insert_relation_rows("R", [(7, "+", {"k": "x", "at": 999}), (8, "+", {"k": "y"})])
    spec = relation(catalog_url, {"k": "string", "at": "int"}, name="R", timestamp="at")
    with open_source(spec, "ms") as reader:
        assert [(t, row) for t, _, _, row in read_all(reader)] == [(7, ("x", 7)), (8, ("y", 8))]


def test_rows_that_do_not_fit_are_dead_letters(catalog: Catalog, catalog_url: str):
    catalog.insert_relation_rows(
        "Domains",
        [
            (1, "+", {"domain": "a.com", "rank": 1}),
            (2, "+", {"domain": 7, "rank": 2}),
            (3, "+", {"domain": "c.com", "rank": "high"}),
            (4, "+", {"domain": "d.com", "rank": 4}),
        ],
    )
    bad = catalog.relation_rows("Domains")[1:3]
    spec = relation(catalog_url, {"domain": "string", "rank": "int"})
    with open_source(spec, "ms") as reader:
        chunks = list(reader)
    dead = [d for c in chunks for d in c.dead]
    assert [(d.source, d.file, d.record, d.reason) for d in dead] == [
        ("Domains", "Domains", bad[0].id, "column 'domain': 7 is not a string"),
        ("Domains", "Domains", bad[1].id, "column 'rank': 'high' is not an int"),
    ]
    assert '"rank": "high"' in dead[1].raw
    assert [r[0] for c in chunks for r in zip(*[x.to_pylist() for x in c.columns])] == [
        "a.com",
        "d.com",
    ]


def test_finite_reads_a_snapshot(catalog: Catalog, catalog_url: str):
    catalog.insert_relation_rows("Domains", [(1, "+", {"domain": "a"})])
    with open_source(relation(catalog_url, {"domain": "string"}), "ms") as reader:
        first = reader.read()
        catalog.insert_relation_rows("Domains", [(0, "+", {"domain": "late"})])
        assert reader.read() is None  # rows added after the read began are not in this run
    assert first is not None and first.columns[0].to_pylist() == ["a"]


def test_live_follows_new_rows_and_polls_at_most_every_interval(
    catalog: Catalog, catalog_url: str, monkeypatch
):
    clock = [100.0]
    monkeypatch.setattr(relation_source.time, "monotonic", lambda: clock[0])
    catalog.insert_relation_rows("Domains", [(1, "+", {"domain": "a"})])
    reader = open_source(relation(catalog_url, {"domain": "string"}), "ms", live=True)
    try:
        assert reader.live is True
        snap = reader.read()
        assert snap.columns[0].to_pylist() == ["a"]
        empty = reader.read()
        assert empty is not None and len(empty) == 0 and empty.dead == []
        assert [c.type for c in empty.columns] == [snap.columns[0].type]
        catalog.insert_relation_rows(
            "Domains",
            [(9, "+", {"domain": "c"}), (4, "-", {"domain": "a"}), (6, "+", {"domain": 5})],
        )
        clock[0] += relation_source.POLL_SECONDS / 2
        assert len(reader.read()) == 0  # polled less than POLL_SECONDS ago: not looked at yet
        clock[0] += relation_source.POLL_SECONDS
        news = reader.read()
        assert news.ts.tolist() == [4, 9] and news.ops.tolist() == [-1, 1]
        assert news.columns[0].to_pylist() == ["a", "c"]
        assert [d.reason for d in news.dead] == ["column 'domain': 5 is not a string"]
        clock[0] += relation_source.POLL_SECONDS
        assert len(reader.read()) == 0  # nothing new: empty, never None
    finally:
        reader.close()


def test_live_takes_a_burst_in_batches_without_skipping(catalog: Catalog, catalog_url: str):
    reader = open_source(
        relation(catalog_url, {"n": "int"}, name="N"), "ms", batch_rows=3, live=True
    )
    try:
        assert len(reader.read()) == 0
        catalog.insert_relation_rows("N", [(i % 4, "+", {"n": i}) for i in range(8)])
        seen: list[int] = []
        for _ in range(20):
            chunk = reader.read()
            assert chunk is not None and len(chunk) <= 3
            seen.extend(chunk.columns[0].to_pylist())
            if len(seen) == 8:
                break
            relation_source_time_passes(reader)
        assert sorted(seen) == list(range(8))
    finally:
        reader.close()


def relation_source_time_passes(reader: CatalogRelationReader) -> None:
    reader._next_poll = 0.0  # as if POLL_SECONDS had passed


def test_a_stream_cannot_read_the_catalog(catalog_url: str):
    spec = relation(catalog_url, {"d": "string"}, is_relation=False)
    with pytest.raises(SourceError, match="for relations only"):
        open_source(spec, "ms")


def test_a_missing_or_unmigrated_catalog_is_a_source_error(tmp_path, make_catalog):
    missing = relation(f"sqlite:///{tmp_path / 'none.db'}", {"d": "string"})
    with pytest.raises(SourceError, match="does not exist"):
        open_source(missing, "ms")
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    assert make_catalog(url, migrate=False).revision() is None  # a file with no tables
    reader = open_source(relation(url, {"d": "string"}), "ms")
    with reader, pytest.raises(SourceError, match="not migrated"):
        reader.read()


def test_the_default_catalog_comes_from_the_environment(catalog: Catalog, catalog_url, monkeypatch):
    catalog.insert_relation_rows("Domains", [(1, "+", {"d": "from env"})])
    monkeypatch.setenv("CQ_CATALOG", catalog_url)
    spec = relation(None, {"d": "string"})  # type: ignore[arg-type]
    with open_source(spec, "ms") as reader:
        assert [row for *_, row in read_all(reader)] == [("from env",)]
