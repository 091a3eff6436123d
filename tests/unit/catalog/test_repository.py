"""The catalog repository on SQLite: round trips, the control-field rule, validation, errors."""

from __future__ import annotations

import math

import pytest

from cq_service.catalog import Catalog, CatalogError, CatalogInputError
from tests.unit.catalog.checks import check_round_trip


def test_round_trip(catalog: Catalog):
    check_round_trip(catalog)


def _deploy(catalog: Catalog, weight: float, spec_hash: str = "h", **kw):
    return catalog.upsert_query(
        "p", "q", "SELECT * FROM S", None, weight, spec_hash, "running", **kw
    )


def test_api_controls_survive_a_redeploy_of_an_unchanged_file(catalog: Catalog):
    _deploy(catalog, 1.0)
    catalog.set_control("p", "q", weight=5.0, active=False, memory_budget=1000, qos={"w": [1, 2]})
    again = _deploy(catalog, 1.0, "h2")
    assert (again.weight, again.active, again.memory_budget, again.qos) == (
        5.0,
        False,
        1000,
        {"w": [1, 2]},
    )
    assert again.spec_hash == "h2"


def test_a_file_change_wins_over_the_api_value(catalog: Catalog):
    _deploy(catalog, 1.0)
    catalog.set_control("p", "q", weight=5.0)
    assert _deploy(catalog, 3.0).weight == 3.0  # the file's weight changed: it is applied
    catalog.set_control("p", "q", weight=7.0)
    assert _deploy(catalog, 3.0).weight == 7.0  # unchanged file again: the API value stays


def test_file_qos_and_budget_follow_the_same_rule(catalog: Catalog):
    _deploy(catalog, 1.0, qos={"window": [10, 20]}, memory_budget=500)
    catalog.set_control("p", "q", qos={"window": [5, 20]})
    kept = _deploy(catalog, 1.0, qos={"window": [10, 20]}, memory_budget=500)
    assert (kept.qos, kept.memory_budget) == ({"window": [5, 20]}, 500)
    changed = _deploy(catalog, 1.0, qos={"window": [1, 2]}, memory_budget=None)
    assert (changed.qos, changed.memory_budget) == ({"window": [1, 2]}, None)
    assert catalog.set_control("p", "q", memory_budget=9).memory_budget == 9
    assert catalog.set_control("p", "q", clear_memory_budget=True).memory_budget is None


def test_start_after_is_kept_while_the_query_is_unchanged(catalog: Catalog):
    assert _deploy(catalog, 1.0, start_after=50).start_after == 50
    assert _deploy(catalog, 1.0).start_after == 50  # same spec_hash, None: kept
    assert _deploy(catalog, 1.0, "h2").start_after is None  # a new definition: as given
    assert _deploy(catalog, 1.0, "h3", start_after=70).start_after == 70


def test_a_removed_query_comes_back_with_default_controls(catalog: Catalog):
    _deploy(catalog, 1.0)
    catalog.set_control("p", "q", weight=9.0, active=False)
    catalog.remove_query("p", "q")
    back = _deploy(catalog, 1.0)
    assert (back.weight, back.active) == (1.0, True)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.record_deployment("p", "h", None, "done"), "deployment status"),
        (lambda c: _deploy(c, 0.0), "weight must be a positive number"),
        (lambda c: _deploy(c, math.nan), "weight must be a positive number"),
        (lambda c: c.upsert_query("p", "q", "x", None, 1.0, "h", "paused"), "query status"),
        (lambda c: c.set_control("p", "nope", weight=2.0), "no query 'nope' in pipeline 'p'"),
        (lambda c: c.set_query_status("p", "nope", "running"), "no query 'nope'"),
        (lambda c: c.insert_relation_rows("R", [(1, "*", {})]), r"op must be '\+' or '-'"),
        (lambda c: c.insert_relation_rows("R", [(1.5, "+", {})]), "ts must be an integer"),
        (lambda c: c.insert_relation_rows("R", [(1, "+", [1])]), "must be a JSON object"),
        (lambda c: c.insert_relation_rows("R", [(1, "+", {"x": math.inf})]), "not JSON"),
        (lambda c: c.save_checkpoint("k", 2**63, {}, {}), "out of the 64-bit range"),
    ],
)
def test_bad_requests_are_input_errors(catalog: Catalog, call, message: str):
    _deploy(catalog, 1.0)
    with pytest.raises(CatalogInputError, match=message):
        call(catalog)


def test_a_pipeline_control_survives_redeploys_and_query_removal(catalog: Catalog):
    _deploy(catalog, 1.0)
    catalog.set_pipeline_control("p", scheduler="fifo")
    _deploy(catalog, 2.0, "h2")
    catalog.remove_query("p", "q")
    assert catalog.pipeline_control("p").scheduler == "fifo"


def test_a_pipeline_control_is_replaced_whole(catalog: Catalog):
    catalog.set_pipeline_control("p", scheduler="chain_bounded", latency_bound_ms=0.5)
    again = catalog.set_pipeline_control("p", scheduler="greedy")
    assert (again.scheduler, again.latency_bound_ms) == ("greedy", None)
    assert len(catalog.pipeline_controls()) == 1


@pytest.mark.parametrize(
    ("scheduler", "bound", "message"),
    [
        ("lifo", None, r"unknown scheduler 'lifo' \(known: fifo, round_robin"),
        ("chain", 50, "latency_bound_ms applies to scheduler chain_bounded only"),
        (None, 50, "but the scheduler is none"),
        ("chain_bounded", None, "chain_bounded needs latency_bound_ms"),
        ("chain_bounded", 0, "latency_bound_ms must be a positive number"),
        ("chain_bounded", math.inf, "latency_bound_ms must be a positive number"),
        ("chain_bounded", "50", "latency_bound_ms must be a positive number"),
        ("chain_bounded", True, "latency_bound_ms must be a positive number"),
    ],
)
def test_a_bad_pipeline_control_is_an_input_error(catalog: Catalog, scheduler, bound, message):
    catalog.set_pipeline_control("p", scheduler="fifo")
    with pytest.raises(CatalogInputError, match=message):
        catalog.set_pipeline_control("p", scheduler=scheduler, latency_bound_ms=bound)
    assert catalog.pipeline_control("p").scheduler == "fifo"  # unchanged


def test_chain_share_control_round_trip(catalog: Catalog):
    shared = catalog.set_pipeline_control("p", scheduler="chain_share", share=0.3)
    assert (shared.scheduler, shared.latency_bound_ms, shared.share) == ("chain_share", None, 0.3)
    assert catalog.pipeline_control("p") == shared
    for edge in (0, 1):
        got = catalog.set_pipeline_control("p", scheduler="chain_share", share=edge)
        assert got.share == float(edge) and isinstance(got.share, float)
    again = catalog.set_pipeline_control("p", scheduler="chain")
    assert (again.scheduler, again.share) == ("chain", None)


@pytest.mark.parametrize(
    ("scheduler", "bound", "share", "message"),
    [
        ("chain", None, 0.5, "share applies to scheduler chain_share only, but the scheduler is chain"),
        (None, None, 0.5, "share applies to scheduler chain_share only, but the scheduler is none"),
        ("chain_bounded", 50, 0.5, "share applies to scheduler chain_share only"),
        ("chain_share", None, None, r"scheduler chain_share needs share \(a number from 0 to 1\)"),
        ("chain_share", None, 1.5, "share must be a number from 0 to 1, not 1.5"),
        ("chain_share", None, -0.1, "share must be a number from 0 to 1, not -0.1"),
        ("chain_share", None, math.nan, "share must be a number from 0 to 1, not nan"),
        ("chain_share", None, "0.5", "share must be a number from 0 to 1, not '0.5'"),
        ("chain_share", None, True, "share must be a number from 0 to 1, not True"),
        ("chain_share", 50, 0.5, "latency_bound_ms applies to scheduler chain_bounded only"),
    ],
)
def test_a_bad_share_control_is_an_input_error(catalog: Catalog, scheduler, bound, share, message):
    catalog.set_pipeline_control("p", scheduler="fifo")
    with pytest.raises(CatalogInputError, match=message):
        catalog.set_pipeline_control(
            "p", scheduler=scheduler, latency_bound_ms=bound, share=share
        )
    assert catalog.pipeline_control("p").scheduler == "fifo"  # unchanged


def test_qos_must_be_ranges(catalog: Catalog):
    _deploy(catalog, 1.0)
    for bad in ({"w": [3, 1]}, {"w": [1]}, {"w": "1-2"}, {"w": [1, True]}):
        with pytest.raises(CatalogInputError, match="qos 'w' must be a range"):
            catalog.set_control("p", "q", qos=bad)
    assert catalog.query("p", "q").qos == {}


def test_a_failed_insert_stores_nothing(catalog: Catalog):
    with pytest.raises(CatalogInputError):
        catalog.insert_relation_rows("R", [(1, "+", {"a": 1}), (2, "?", {"a": 2})])
    assert catalog.relation_rows("R") == []


def test_relation_rows_page_by_id_and_by_time(catalog: Catalog):
    catalog.insert_relation_rows("R", [(t, "+", {"i": i}) for i, t in enumerate([3, 1, 2, 1, 3])])
    page1 = catalog.relation_rows("R", limit=2)
    page2 = catalog.relation_rows("R", after_id=page1[-1].id, limit=10)
    assert [r.row["i"] for r in page1 + page2] == [0, 1, 2, 3, 4]
    first = catalog.relation_rows_by_time("R", limit=3)
    rest = catalog.relation_rows_by_time("R", after=(first[-1].ts, first[-1].id))
    assert [(r.ts, r.row["i"]) for r in first + rest] == [(1, 1), (1, 3), (2, 2), (3, 0), (3, 4)]
    upto = catalog.relation_rows_by_time("R", after_id=page1[0].id, up_to_id=page2[1].id)
    assert [r.row["i"] for r in upto] == [1, 3, 2]  # ids 2..4 only, by time
    assert catalog.relation_rows("other") == [] and catalog.last_relation_row_id("other") == 0


def test_an_unmigrated_catalog_says_how_to_migrate(make_catalog):
    fresh = make_catalog(migrate=False)
    with pytest.raises(CatalogError, match=r"not migrated.*cq catalog upgrade"):
        fresh.queries()


def test_a_reader_does_not_create_a_catalog(tmp_path):
    with pytest.raises(CatalogError, match="does not exist"):
        Catalog(f"sqlite:///{tmp_path / 'missing.db'}", create=False)
    assert not (tmp_path / "missing.db").exists()
