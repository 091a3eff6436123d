"""MJoin (plan/mjoins.py, engine/operators/mjoin.py) against the tree of binary joins and the
reference evaluator: random 3- to 5-way joins over random join graphs (a spanning tree plus
random extra equalities, so cyclic graphs too), random Range, Rows, Now, Range-Slide and Partition windows
and relation inputs with inserts and deletes, random residual predicates, random data with
NULL keys, ties and duplicates, under two scheduling policies. Each case must also be planned
as one MJoin under ``join: mjoin`` and as none under ``tree``, so a rewrite that stopped
applying fails here rather than passing by running the tree; under ``auto`` as the form its cost
model chose (the plan's note), which must give the same results. Under ``mjoin-caching`` the caches
are forced: the A-Caching selector chooses at every step, either taking every candidate it can
(every net benefit positive) or a random set of caches with random pool shares, so caches are
filled, hit, invalidated by window expiries and relation deletions, and dropped."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cq_service.adaptive import caching
from cq_service.compiler import load_and_compile, run_plan
from cq_service.plan.mjoins import MJoinOp
from tests.property.harness import assert_same, run_under_policies, write_pipeline
from tests.unit.engine.mjoins import RandomCaches

SCHEMA = {"a": "int", "b": "int"}
POLICIES = (("chain", None), ("fifo", None))


@st.composite
def windows(draw) -> str:
    kind = draw(st.sampled_from(["range", "range", "rows", "rows", "now", "slide", "partition"]))
    if kind == "range":
        return f"[Range {draw(st.integers(0, 8))}]"
    if kind == "rows":
        return f"[Rows {draw(st.integers(1, 4))}]"
    if kind == "partition":
        return f"[Partition By {draw(st.sampled_from(['a', 'b']))} Rows {draw(st.integers(1, 2))}]"
    if kind == "slide":
        return f"[Range {draw(st.integers(1, 6))} Slide {draw(st.integers(2, 4))}]"
    return "[Now]"


@st.composite
def graphs(draw) -> tuple[int, list[str], list[str]]:
    """(inputs, equalities, residual conjuncts): a random spanning tree, then extra edges."""
    n = draw(st.integers(3, 5))
    col = st.sampled_from(["a", "b"])
    eqs = []
    for i in range(1, n):
        j = draw(st.integers(0, i - 1))
        eqs.append(f"I{j}.{draw(col)} = I{i}.{draw(col)}")
    for _ in range(draw(st.integers(0, 2))):  # cycles
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        if i != j:
            eqs.append(f"I{i}.{draw(col)} = I{j}.{draw(col)}")
    residuals = []
    if draw(st.booleans()):
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        op = draw(st.sampled_from(["<", "<>", "<="]))
        residuals.append(f"I{i}.b {op} I{j}.b + {draw(st.integers(0, 2))}")
    if draw(st.booleans()):
        residuals.append(f"I{draw(st.integers(0, n - 1))}.b > {draw(st.integers(0, 2))}")
    if draw(st.integers(0, 4)) == 0:  # an equality of an expression over two inputs: a filter
        residuals.append(f"I0.a + I1.a = I{n - 1}.b")
    return n, eqs, residuals


def values(draw, nulls: bool):
    if nulls and draw(st.integers(0, 7)) == 0:
        return None
    return draw(st.integers(0, 3))


@st.composite
def stream_rows(draw, nulls: bool) -> list[dict]:
    k = draw(st.integers(0, 12))
    ts = sorted(draw(st.lists(st.integers(0, 20), min_size=k, max_size=k)))
    return [{"ts": t, "a": values(draw, nulls), "b": values(draw, nulls)} for t in ts]


@st.composite
def relation_rows(draw, nulls: bool) -> list[dict]:
    k = draw(st.integers(0, 12))
    ts = sorted(draw(st.lists(st.integers(0, 20), min_size=k, max_size=k)))
    bag: list[dict] = []
    out = []
    for t in ts:
        if bag and draw(st.integers(0, 2)) == 2:
            victim = bag.pop(draw(st.integers(0, len(bag) - 1)))
            out.append({"ts": t, **victim, "_op": "-"})
            continue
        rec = {"a": values(draw, nulls), "b": values(draw, nulls)}
        bag.append(rec)
        out.append({"ts": t, **rec, "_op": "+"})
    return out


@st.composite
def cases(draw) -> tuple[dict, dict]:
    n, eqs, residuals = draw(graphs())
    nulls = draw(st.booleans())
    streams, relations, data, items = {}, {}, {}, []
    for i in range(n):
        name = f"I{i}"
        if draw(st.integers(0, 3)) == 0:
            relations[name] = {"schema": dict(SCHEMA), "format": "jsonl"}
            data[name] = draw(relation_rows(nulls))
            items.append(name)
        else:
            streams[name] = {"schema": dict(SCHEMA), "format": "csv"}
            data[name] = draw(stream_rows(nulls))
            items.append(f"{name} {draw(windows())}")
    where = " AND ".join(eqs + residuals)
    frm = f"FROM {', '.join(items)} WHERE {where}"
    cols = [f"I{i}.{c}" for i in range(n) for c in ("a", "b")]
    picked = draw(st.permutations(cols))[: draw(st.integers(1, len(cols)))]
    shape = draw(st.sampled_from(["rel", "rel", "star", "istream", "count"]))
    if shape == "rel":
        cql = f"SELECT {', '.join(picked)} {frm}"
    elif shape == "star":
        cql = f"SELECT * {frm}"
    elif shape == "istream":
        cql = f"SELECT Istream({', '.join(picked)}) {frm}"
    else:
        cql = f"SELECT I0.a, COUNT(*) AS n {frm} GROUP BY I0.a"
    pipeline = {"streams": streams, "relations": relations, "queries": {"q": cql}}
    return pipeline, data


def _mjoins(path) -> int:
    return sum(isinstance(n.op, MJoinOp) for n in run_plan(load_and_compile(path)).nodes)


def _auto_form(path) -> str:
    """The form `join: auto` chose for the query's join (plan/mjoins.py notes it)."""
    (note,) = run_plan(load_and_compile(path)).notes
    return note.split(" runs as ")[1].split()[0]


@settings(
    max_examples=int(os.environ.get("MJ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases(), forced=st.one_of(st.none(), st.integers(0, 1000)))
def test_mjoin_matches_tree_and_reference(tmp_path_factory, case, forced) -> None:
    pipeline, data = case
    outs = {}
    for join in ("tree", "mjoin", "mjoin-caching", "auto"):
        tmp = tmp_path_factory.mktemp(join)
        p = {**pipeline, "resources": {"join": join}}
        path = write_pipeline(tmp, p, data)
        form = _auto_form(path) if join == "auto" else join
        assert _mjoins(path) == (form != "tree")
        with pytest.MonkeyPatch.context() as mp:
            _force_caches(mp, forced)
            engines, reference = run_under_policies(tmp, p, data, POLICIES)
        for out in engines.values():
            assert_same(out, reference)
        outs[join] = engines
    for policy, _ in POLICIES:
        assert_same(outs["mjoin"][policy], outs["tree"][policy])
        assert_same(outs["mjoin-caching"][policy], outs["tree"][policy])
        assert_same(outs["auto"][policy], outs["tree"][policy])


def _force_caches(mp: pytest.MonkeyPatch, seed: int | None) -> None:
    """A-Caching choosing at every step: every candidate (seed None), or at random."""
    mp.setattr(caching.ACaching, "every", 1)
    if seed is None:
        mp.setattr(caching, "net_benefit", lambda s: 1.0)
    else:
        rnd = RandomCaches(seed)
        mp.setattr(caching.ACaching, "choose", lambda self, stats, pool: rnd.choose(stats, pool))
