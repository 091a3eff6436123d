"""Checks run against every catalog backend: SQLite here, PostgreSQL in tests/integration."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import inspect

from cq_service.catalog import Catalog, head_revision
from cq_service.catalog.models import Base

TABLES = {
    "streams",
    "relation_rows",
    "queries",
    "deployments",
    "adjustments",
    "stats_snapshots",
    "checkpoints",
    "pipeline_controls",
    "archive_progress",
    "query_handovers",
    "stored_pipelines",
}


def tables(catalog: Catalog) -> set[str]:
    return set(inspect(catalog.engine).get_table_names()) - {"alembic_version"}


def check_migrations_up_down_up(catalog: Catalog) -> None:
    """Upgrade creates every table, downgrade to base removes them all, upgrade again works."""
    assert catalog.revision() is None
    assert tables(catalog) == set()
    catalog.upgrade()
    assert catalog.revision() == head_revision()
    assert tables(catalog) == TABLES == set(Base.metadata.tables)
    catalog.record_deployment("p", "h", None, "applied")
    catalog.downgrade("base")
    assert catalog.revision() is None
    assert tables(catalog) == set()
    catalog.upgrade()
    assert tables(catalog) == TABLES
    assert catalog.deployments() == []  # the data went with the tables
    catalog.upgrade()  # already at head: nothing to do
    assert catalog.is_current()


def check_round_trip(catalog: Catalog) -> None:
    """Every kind of record goes in and comes back out equal (a migrated, empty catalog)."""
    first = catalog.record_deployment("web", "h1", "abc123", "applied")
    second = catalog.record_deployment("web", "h2", None, "rejected", "p.yaml:3:5: bad key")
    catalog.record_deployment("other", "h3", None, "removed")
    log = catalog.deployments("web")
    assert [(d.id, d.spec_hash, d.revision, d.status, d.error) for d in log] == [
        (first, "h1", "abc123", "applied", None),
        (second, "h2", None, "rejected", "p.yaml:3:5: bad key"),
    ]
    assert isinstance(log[0].created_at, datetime) and log[0].created_at.tzinfo is not None
    assert len(catalog.deployments()) == 3

    sink = {"type": "file", "path": "/out/q.jsonl", "format": "jsonl"}
    q = catalog.upsert_query("web", "q", "SELECT * FROM S", sink, 2.5, "hq", "running", 100)
    assert (q.pipeline, q.name, q.cql, q.sink, q.weight) == (
        "web",
        "q",
        "SELECT * FROM S",
        sink,
        2.5,
    )
    assert (q.active, q.qos, q.memory_budget, q.start_after, q.status) == (
        True,
        {},
        None,
        100,
        "running",
    )
    catalog.upsert_query("web", "view", "SELECT a FROM S", None, 1.0, "hv", "running")
    catalog.upsert_query("aaa", "z", "SELECT a FROM S", None, 1.0, "hz", "stopped")
    assert [(r.pipeline, r.name) for r in catalog.queries()] == [
        ("aaa", "z"),
        ("web", "q"),
        ("web", "view"),
    ]
    assert [r.name for r in catalog.queries("web")] == ["q", "view"]
    controlled = catalog.set_control(
        "web", "q", weight=4.0, active=False, memory_budget=1 << 40, qos={"window": [60, 600]}
    )
    assert (controlled.weight, controlled.active, controlled.memory_budget, controlled.qos) == (
        4.0,
        False,
        1 << 40,
        {"window": [60, 600]},
    )
    failed = catalog.set_query_status("web", "q", "failed", "boom")
    assert (failed.status, failed.error, failed.weight) == ("failed", "boom", 4.0)
    assert catalog.query("web", "q") == failed
    assert catalog.remove_query("web", "view") is True
    assert catalog.remove_query("web", "view") is False
    assert catalog.query("web", "view") is None

    src = catalog.upsert_source(
        "web",
        {
            "name": "Domains",
            "is_relation": True,
            "schema": {"zeta": "string", "alpha": "int", "mid": "bool"},
            "source": {"type": "catalog", "name": "Dom"},
            "timestamp": None,
        },
    )
    assert list(src.schema) == ["zeta", "alpha", "mid"]  # column order survives (JSONB too)
    assert src.catalog_relation == "Dom"
    assert [s.name for s in catalog.relation_declarations("Dom")] == ["Domains"]

    rows = [
        (5, "+", {"k": "b", "n": 2}),
        (1, "+", {"k": "a", "n": 1}),
        (5, "-", {"k": "a", "n": 1}),
    ]
    assert catalog.insert_relation_rows("Dom", rows) == 3
    assert catalog.insert_relation_rows("Dom", [(0, -1, {"k": "p"})], pipeline="web") == 1
    by_id = catalog.relation_rows("Dom")
    assert [(r.ts, r.op, r.row) for r in by_id] == [*rows, (0, "-", {"k": "p"})]  # -1 is "-"
    ids = [r.id for r in by_id]
    assert ids == sorted(ids)
    by_time = catalog.relation_rows_by_time("Dom")
    assert [(r.ts, r.id) for r in by_time] == sorted((r.ts, r.id) for r in by_id)
    assert [r.row["k"] for r in catalog.relation_rows_by_time("Dom", pipeline="other")] == [
        "a",
        "b",
        "a",
    ]  # another pipeline sees only the shared rows
    assert catalog.last_relation_row_id("Dom") == ids[-1]

    adj = catalog.log_adjustment("web", "window", {"from": 600, "to": 300}, query="q")
    catalog.log_adjustment("web", "shed", {"ratio": 0.1})
    assert [(a.id, a.query, a.kind, a.detail) for a in catalog.adjustments("web", query="q")] == [
        (adj, "q", "window", {"from": 600, "to": 300})
    ]
    assert [a.kind for a in catalog.adjustments("web", limit=1)] == ["shed"]
    catalog.save_stats({"rows": 10}, pipeline="web")
    catalog.save_stats({"rows": 20})
    assert [s.data for s in catalog.stats()] == [{"rows": 10}, {"rows": 20}]
    assert [s.data for s in catalog.stats("web")] == [{"rows": 10}]

    assert catalog.pipeline_control("web") is None
    bounded = catalog.set_pipeline_control("web", scheduler="chain_bounded", latency_bound_ms=50)
    assert (bounded.pipeline, bounded.scheduler, bounded.latency_bound_ms) == (
        "web",
        "chain_bounded",
        50.0,
    )
    assert bounded.updated_at.tzinfo is not None
    shared = catalog.set_pipeline_control("web", scheduler="chain_share", share=0.25)
    assert (shared.scheduler, shared.latency_bound_ms, shared.share) == ("chain_share", None, 0.25)
    assert catalog.pipeline_control("web") == shared
    catalog.set_pipeline_control("aaa", scheduler="fifo")
    replaced = catalog.set_pipeline_control("web", scheduler=None)  # back to the file's
    assert (replaced.scheduler, replaced.latency_bound_ms, replaced.share) == (None, None, None)
    assert catalog.pipeline_control("web") == replaced
    assert [(c.pipeline, c.scheduler) for c in catalog.pipeline_controls()] == [
        ("aaa", "fifo"),
        ("web", None),
    ]
    assert catalog.clear_pipeline_control("aaa") is True
    assert catalog.clear_pipeline_control("aaa") is False
    assert catalog.pipeline_control("aaa") is None

    assert catalog.load_checkpoint("worker") is None
    catalog.save_checkpoint("worker", 10, {"S/topic": {0: 123}}, {"web/q": {"frontier": 10}})
    catalog.save_checkpoint("worker", 42, {"S/topic": {0: 130, 1: 7}}, {"web/q": {"frontier": 42}})
    cp = catalog.load_checkpoint("worker")
    assert cp is not None
    assert (cp.key, cp.frontier, cp.offsets, cp.queries) == (
        "worker",
        42,
        {"S/topic": {"0": 130, "1": 7}},
        {"web/q": {"frontier": 42}},
    )
    assert cp.updated_at is not None and cp.updated_at.tzinfo is not None

    assert catalog.store_pipeline("api", "api.yaml", "name: api\n", "h1") == 1
    assert catalog.store_pipeline("api", "api.yaml", "name: api\n", "h1") == 1
    assert catalog.store_pipeline("api", "/x/api.yaml", "name: api # 2\n", "h2") == 2
    [stored] = catalog.stored_pipelines()
    assert (stored.pipeline, stored.filename, stored.text, stored.spec_hash, stored.revision) == (
        "api", "/x/api.yaml", "name: api # 2\n", "h2", 2
    )
    assert stored.updated_at.tzinfo is not None
