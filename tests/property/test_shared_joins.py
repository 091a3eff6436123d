"""Shared window joins (plan/shared_joins.py, engine/operators/shared_join.py) against the
reference evaluator: random window sets (Range and Rows, equal or not on the two sides, equal
across queries or not), random selections and residuals above the join, relation, Istream,
Dstream, Rstream and aggregate outputs, random data with ties, under every shared join policy
(MQT, SWF, LWO), every scheduling policy and several chunkings. Each case must also be planned as a shared join, so a rewrite that stopped
applying would fail here rather than pass by planning each query alone."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cq_service.compiler import load_and_compile
from cq_service.plan.panes import fuse_panes
from cq_service.plan.shared_joins import SharedJoinOp, share_window_joins
from tests.property.harness import POLICIES, assert_same, run_under_policies, write_pipeline

STREAMS = {
    "A": {"schema": {"k": "int", "s": "string", "x": "int"}, "format": "csv"},
    "B": {"schema": {"k": "int", "s": "string", "y": "int"}, "format": "csv"},
}


# Join keys: one int (searched in sorted runs), two columns and a string (hash-filtered runs),
# none (a cross product).
KEYS = (("A.k = B.k",), ("A.k = B.k",), ("A.k = B.k", "A.x = B.y"), ("A.s = B.s",), ())


@st.composite
def windows(draw) -> str:
    if draw(st.booleans()):
        return f"[Range {draw(st.integers(0, 12))}]"
    return f"[Rows {draw(st.integers(1, 6))}]"


@st.composite
def queries(draw) -> dict[str, str]:
    n = draw(st.integers(2, 5))
    pool = [draw(windows()) for _ in range(draw(st.integers(1, 3)))]
    out = {}
    for i in range(n):
        wa = draw(st.sampled_from(pool))
        wb = wa if draw(st.booleans()) else draw(st.sampled_from(pool))
        conds = list(draw(st.sampled_from(KEYS)))
        if draw(st.booleans()):
            conds.append(f"A.x > {draw(st.integers(0, 9))}")
        if draw(st.booleans()):
            conds.append(f"B.y <= {draw(st.integers(0, 9))}")
        if draw(st.booleans()):
            conds.append("A.x <> B.y")
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        frm = f"FROM A {wa}, B {wb}{where}"
        shape = draw(st.sampled_from(
            ["rel", "istream", "istream_all", "dstream", "rstream", "count", "group"]
        ))
        if shape == "istream_all":  # (Istream reads the route, through filters at most)
            cql = f"SELECT Istream(*) {frm}"
        elif shape == "rel":
            cql = f"SELECT A.x, B.y {frm}"
        elif shape == "count":
            cql = f"SELECT COUNT(*) AS n {frm}"
        elif shape == "group":
            cql = f"SELECT A.k, SUM(B.y) AS s {frm} GROUP BY A.k"
        else:
            cql = f"SELECT {shape.capitalize()}(A.x, B.y) {frm}"
        out[f"q{i}"] = cql
    return out


@st.composite
def stream(draw, name: str, col: str) -> list[dict]:
    n = draw(st.integers(0, 25))
    ts = sorted(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)))
    keys = draw(st.integers(1, 4))
    out = []
    for t in ts:
        k = None if draw(st.integers(0, 9)) == 0 else draw(st.integers(0, keys))
        out.append({"ts": t, "k": k, "s": None if k is None else f"s{k}",
                    col: draw(st.integers(0, 9))})
    return out


def _should_share(qs: dict[str, str]) -> bool:
    """Whether two queries join on the same keys with different windows."""
    pairs: dict[tuple[str, ...], set[tuple[str, str]]] = {}
    for cql in qs.values():
        m = re.search(r"FROM A (\[[^]]*\]), B (\[[^]]*\])", cql)
        assert m is not None
        keys = tuple(k for k in ("A.k = B.k", "A.x = B.y", "A.s = B.s") if k in cql)
        pairs.setdefault(keys, set()).add((m.group(1), m.group(2)))
    return any(len(p) >= 2 for p in pairs.values())


@settings(max_examples=int(os.environ.get("SJ_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    qs=queries(),
    a=stream("A", "x"),
    b=stream("B", "y"),
    policy=st.sampled_from(["mqt", "swf", "lwo"]),
)
def test_shared_join_matches_reference(tmp_path_factory, qs, a, b, policy) -> None:
    tmp = tmp_path_factory.mktemp("sj")
    pipeline = {"streams": STREAMS, "queries": qs, "resources": {"shared_join": policy}}
    data = {"A": a, "B": b}
    path = write_pipeline(tmp, pipeline, data)
    compiled = load_and_compile(path)
    plain = fuse_panes(compiled.plan)
    shared = share_window_joins(plain, compiled.spec.resources.shared_join)
    assert any(isinstance(n.op, SharedJoinOp) for n in shared.nodes) == _should_share(qs)
    engines, reference = run_under_policies(tmp, pipeline, data, POLICIES)
    for out in engines.values():
        assert_same(out, reference)


@pytest.mark.parametrize("policy", ["mqt", "swf", "lwo"])
def test_istream_keeps_the_retractions_that_cancel_an_equal_insertion(
    tmp_path_factory, policy: str
) -> None:
    """A route read only by Istream computes its retractions only at instants where a new tuple
    may equal an earlier one: here the pairs entering at 5 equal the pair leaving then."""
    qs = {
        "short": "SELECT Istream(*) FROM A [Range 4], B [Range 4] WHERE A.k = B.k",
        "long": "SELECT Istream(*) FROM A [Range 9], B [Range 9] WHERE A.k = B.k",
    }
    a = [{"ts": t, "k": 1, "s": "s1", "x": 1} for t in (0, 5, 7)]
    b = [{"ts": t, "k": 1, "s": "s1", "y": 2} for t in (0, 5)]
    tmp = tmp_path_factory.mktemp("sj")
    pipeline = {"streams": STREAMS, "queries": qs, "resources": {"shared_join": policy}}
    data = {"A": a, "B": b}
    compiled = load_and_compile(write_pipeline(tmp, pipeline, data))
    (shared,) = [
        n.op for n in share_window_joins(compiled.plan, policy).nodes
        if isinstance(n.op, SharedJoinOp)
    ]
    assert shared.istream_routes == {0, 1}
    engines, reference = run_under_policies(tmp, pipeline, data, POLICIES)
    # [Range 4]: (a0, b0) at 0, and at 5 the equal pair (a5, b5) replaces it: nothing new;
    # (a7, b5) at 7 is new. [Range 9]: three more equal pairs at 5, and two at 7.
    assert [e[0] for e in reference["short"]] == [0, 7]
    assert [e[0] for e in reference["long"]] == [0, 5, 5, 5, 7, 7]
    for out in engines.values():
        assert_same(out, reference)
