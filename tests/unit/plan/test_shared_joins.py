"""Which joins plan/shared_joins.py shares, and how `cq explain` shows them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cq_service.compiler import load_and_compile
from cq_service.plan.explain import explain
from cq_service.plan.shared_joins import SharedJoinOp, SharedJoinRouteOp, share_window_joins

HEAD = """version: 1
name: sj
time_unit: s
{resources}
streams:
  A:
    schema: {{k: int, x: int}}
    timestamp: ts
    source: {{type: file, path: a.csv, format: csv}}
  B:
    schema: {{k: int, y: int}}
    timestamp: ts
    source: {{type: file, path: b.csv, format: csv}}
queries:
"""


def _plan(tmp_path: Path, queries: dict[str, str], resources: str = "", qos: str = ""):
    text = HEAD.format(resources=resources)
    for name, cql in queries.items():
        text += f"  {name}:\n    cql: {cql}\n    sink: {{type: blackhole}}\n"
        if qos and name == "q1":
            text += f"    qos: {qos}\n"
    (tmp_path / "a.csv").write_text("ts,k,x\n")
    (tmp_path / "b.csv").write_text("ts,k,y\n")
    path = tmp_path / "p.yaml"
    path.write_text(text)
    compiled = load_and_compile(path)
    return compiled.plan, share_window_joins(compiled.plan, compiled.spec.resources.shared_join)


def _shared(plan) -> list[SharedJoinOp]:
    return [n.op for n in plan.nodes if isinstance(n.op, SharedJoinOp)]


def test_windows_that_differ_share_one_join_with_a_route_each(tmp_path: Path) -> None:
    plain, plan = _plan(tmp_path, {
        "q1": "SELECT * FROM A [Range 5], B [Range 5] WHERE A.k = B.k",
        "q2": "SELECT * FROM A [Range 60], B [Rows 3] WHERE A.k = B.k AND A.x > 2",
        "q3": "SELECT * FROM A [Range 5], B [Range 5] WHERE A.k = B.k AND B.y < A.x",
    })
    (shared,) = _shared(plan)
    assert [(str(a), str(b)) for a, b in shared.routes] == [
        ("[Range 5]", "[Range 5]"), ("[Range 60]", "[Rows 3]")
    ]
    routes = {n.id: n for n in plan.nodes if isinstance(n.op, SharedJoinRouteOp)}
    # q1 and q3 have equal windows: one route feeds both (q3 through its residual, above it).
    assert sorted(sorted(n.queries) for n in routes.values()) == [["q1", "q3"], ["q2"]]
    assert not any(type(n.op).__name__ in ("Join", "WindowOp") for n in plan.nodes)
    text = explain(plan)
    assert "shared window join on 1 key(s) (MQT), routes #0 [Range 5] ⋈ [Range 5]" in text
    assert "shared join route #1: [Range 60] ⋈ [Rows 3]" in text
    assert len(plan.nodes) < len(plain.nodes)


def test_off_plans_each_query_alone(tmp_path: Path) -> None:
    plain, plan = _plan(
        tmp_path,
        {"q1": "SELECT * FROM A [Range 5], B [Range 5] WHERE A.k = B.k",
         "q2": "SELECT * FROM A [Range 9], B [Range 9] WHERE A.k = B.k"},
        resources='resources: {shared_join: "off"}',
    )
    assert plan is plain and not _shared(plan)


@pytest.mark.parametrize(
    ("q2", "why"),
    [
        ("SELECT * FROM A [Range 9], B [Range 9] WHERE A.x = B.y", "other keys"),
        ("SELECT * FROM B [Range 9], A [Range 9] WHERE A.k = B.k", "the streams swapped"),
        ("SELECT * FROM A [Range 9 Slide 3], B [Range 9] WHERE A.k = B.k", "a slide"),
        ("SELECT * FROM A [Partition By A.k Rows 2], B [Rows 2] WHERE A.k = B.k", "a partition"),
        ("SELECT * FROM A [Range 5], B [Range 5] WHERE A.k = B.k", "equal windows"),
    ],
)
def test_what_is_not_shared(tmp_path: Path, q2: str, why: str) -> None:
    _, plan = _plan(tmp_path, {"q1": "SELECT * FROM A [Range 5], B [Range 5] WHERE A.k = B.k",
                               "q2": q2})
    assert not _shared(plan), why


def test_a_window_the_query_may_adjust_stays_its_own(tmp_path: Path) -> None:
    _, plan = _plan(
        tmp_path,
        {"q1": "SELECT * FROM A [Range 5], B [Range 5] WHERE A.k = B.k",
         "q2": "SELECT * FROM A [Range 9], B [Range 9] WHERE A.k = B.k"},
        qos="{window: {A: [2, 5], B: [2, 5]}}",
    )
    assert not _shared(plan)


def test_routes_read_only_by_istream_are_marked(tmp_path: Path) -> None:
    """Only a route whose every reader is an Istream, directly or through a filter, may skip
    the retractions no equal insertion meets (engine/operators/shared_join.py)."""
    _, plan = _plan(tmp_path, {
        "direct": "SELECT Istream(*) FROM A [Range 5], B [Range 5] WHERE A.k = B.k",
        "filtered": "SELECT Istream(*) FROM A [Range 9], B [Range 9] WHERE A.k = B.k AND A.x > 1",
        "projected": "SELECT Istream(A.x) FROM A [Range 20], B [Range 20] WHERE A.k = B.k",
        "relation": "SELECT * FROM A [Range 30], B [Range 30] WHERE A.k = B.k",
        "mixed_i": "SELECT Istream(*) FROM A [Range 40], B [Range 40] WHERE A.k = B.k",
        "mixed_d": "SELECT Dstream(*) FROM A [Range 40], B [Range 40] WHERE A.k = B.k",
    })
    (shared,) = _shared(plan)
    sizes = [int(str(a).split()[1].rstrip("]")) for a, _ in shared.routes]
    assert sorted(sizes[i] for i in shared.istream_routes) == [5, 9]
