"""Which join trees plan/mjoins.py makes one MJoin, with what edges, filters and probe orders,
and how `cq explain` shows them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cq_service.compiler import run_plan
from cq_service.cql import logical as L
from cq_service.plan.explain import explain
from cq_service.plan.mjoins import Edge, JoinChoice, MJoinOp, multiway_joins, static_order
from cq_service.types import DataType
from tests.unit.plan.join_pipelines import compile_joins


def _mjoins(plan) -> list[MJoinOp]:
    return [n.op for n in plan.nodes if isinstance(n.op, MJoinOp)]


def _joins(plan) -> int:
    return sum(isinstance(n.op, L.Join) for n in plan.nodes)


THREE = "SELECT * FROM A [Range 5], B [Rows 3], C [Now] WHERE A.k = B.k AND B.y = C.k AND A.x < C.z"


def test_a_three_way_tree_becomes_one_mjoin_with_the_tree_columns(tmp_path: Path) -> None:
    compiled = compile_joins(tmp_path, {"q": THREE})
    plan = multiway_joins(compiled.plan, "mjoin")
    (mj,) = _mjoins(plan)
    assert _joins(plan) == 0
    tree_root = next(
        n
        for n in compiled.plan.nodes
        if isinstance(n.op, L.Join)
        and not any(
            isinstance(compiled.plan.nodes[c].op, L.Join) for c in compiled.plan.consumers(n.id)
        )
    )
    assert mj.schema == tree_root.op.schema  # the tree's columns, in its order
    assert [f.name for f in mj.schema] == ["k", "x", "k", "y", "k", "z"]
    assert {(e.left, e.right) for e in mj.edges} == {(0, 1), (1, 2)}
    assert len(mj.filters) == 1  # A.x < C.z
    assert mj.orders == ((0, 1, 2), (1, 0, 2), (2, 1, 0))
    # the sink still reads the same columns, and the plan is one node per operator
    assert plan.sinks[0].types == compiled.plan.sinks[0].types
    assert len(plan.nodes) == len(compiled.plan.nodes) - 1


def test_four_inputs_with_a_cycle(tmp_path: Path) -> None:
    q = (
        "SELECT A.x, D.w FROM A [Range 5], B [Range 5], C [Range 5], D [Range 5] "
        "WHERE A.k = B.k AND B.k = C.k AND C.k = A.k AND C.z = D.k"
    )
    plan = multiway_joins(compile_joins(tmp_path, {"q": q}).plan, "mjoin")
    (mj,) = _mjoins(plan)
    assert len(mj.inputs) == 4 and len(mj.edges) == 4
    assert mj.orders[3] == (3, 2, 0, 1)  # D, then C (its only edge), then A and B


def test_tree_keeps_the_binary_joins(tmp_path: Path) -> None:
    compiled = compile_joins(tmp_path, {"q": THREE}, "tree")
    plan = run_plan(compiled)
    assert not _mjoins(plan)
    assert _joins(plan) == 2


def test_auto_without_a_chooser_keeps_the_tree(tmp_path: Path) -> None:
    compiled = compile_joins(tmp_path, {"q": THREE}, "auto")
    assert multiway_joins(compiled.plan, "auto") is compiled.plan


@pytest.mark.parametrize("form", ["tree", "mjoin", "mjoin-caching"])
def test_auto_takes_the_form_chosen_and_explain_names_it(tmp_path: Path, form: str) -> None:
    compiled = compile_joins(tmp_path, {"q": THREE}, "auto")
    seen = []

    def choose(plan, cand):
        seen.append(cand)
        return JoinChoice(form, {"tree": (3.0, 4.0), "mjoin": (2.0, 3.0)})

    plan = multiway_joins(compiled.plan, "auto", choose)
    (cand,) = seen
    assert len(cand.leaves) == 3 and len(cand.joins) == 2 and len(cand.edge_joins) == 2
    mjoins = _mjoins(plan)
    assert len(mjoins) == (form != "tree") and _joins(plan) == (2 if form == "tree" else 0)
    if mjoins:
        assert mjoins[0].caching == (form == "mjoin-caching") and mjoins[0].auto
    text = explain(plan)
    assert f"join auto: q's 3-way join runs as {form}" in text
    assert "tree 3; mjoin 2" in text
    if form != "tree":
        assert f"join: auto chose {form};" in text


def test_auto_in_run_plan_uses_the_cost_model(tmp_path: Path) -> None:
    plan = run_plan(compile_joins(tmp_path, {"q": THREE}, "auto"))
    assert any(n.startswith("join auto: q's 3-way join runs as ") for n in plan.notes)


def test_two_inputs_stay_a_binary_join(tmp_path: Path) -> None:
    compiled = compile_joins(tmp_path, {"q": "SELECT * FROM A [Range 5], B [Range 5] WHERE A.k = B.k"})
    assert multiway_joins(compiled.plan, "mjoin") is compiled.plan


def test_a_disconnected_graph_is_left_alone(tmp_path: Path) -> None:
    # C joins nothing by an equality (A.x < C.z is no key): the tree's Cartesian product stays
    q = "SELECT * FROM A [Range 5], B [Range 5], C [Range 5] WHERE A.k = B.k AND A.x < C.z"
    compiled = compile_joins(tmp_path, {"q": q})
    assert multiway_joins(compiled.plan, "mjoin") is compiled.plan


def test_equalities_over_several_inputs_are_filters(tmp_path: Path) -> None:
    q = (
        "SELECT * FROM A [Range 5], B [Range 5], C [Range 5] "
        "WHERE A.k = B.k AND B.y = C.k AND A.x + B.y = C.z"
    )
    (mj,) = _mjoins(multiway_joins(compile_joins(tmp_path, {"q": q}).plan, "mjoin"))
    assert len(mj.edges) == 2 and len(mj.filters) == 1


def test_each_query_gets_its_own_mjoin_and_shared_inputs_stay_shared(tmp_path: Path) -> None:
    compiled = compile_joins(
        tmp_path,
        {
            "q1": THREE,
            "q2": "SELECT * FROM A [Range 5], B [Rows 3], D [Now] WHERE A.k = B.k AND B.y = D.k",
            "q3": "SELECT * FROM A [Range 5], B [Rows 3] WHERE A.k = B.k",
        },
    )
    plan = multiway_joins(compiled.plan, "mjoin")
    assert len(_mjoins(plan)) == 2
    assert _joins(plan) == 1  # q3's A ⋈ B, which the trees of q1 and q2 shared
    windows = [n for n in plan.nodes if isinstance(n.op, L.WindowOp)]
    assert len(windows) == len({n.op for n in windows})  # each window once


def test_explain_shows_the_mjoin_and_its_probe_orders(tmp_path: Path) -> None:
    text = explain(run_plan(compile_joins(tmp_path, {"q": THREE})))
    assert "mjoin of 3 inputs (2 equi-join key(s), 1 filter(s); probe orders " in text
    assert "0→1→2; 1→0→2; 2→1→0" in text


def test_static_order_prefers_inputs_with_more_edges() -> None:
    k = L.ColRef(0, DataType.INT)
    edges = (Edge(0, k, 1, k), Edge(0, k, 2, k), Edge(1, k, 2, k), Edge(2, k, 3, k))
    assert static_order(4, edges, 0) == (0, 1, 2, 3)
    assert static_order(4, edges, 3) == (3, 2, 0, 1)
    with pytest.raises(ValueError):
        static_order(4, edges[:2], 0)
