"""Fusing aggregates over sliding windows into paned operators (plan/panes.py): where it is
done, where not, that `cq explain` shows it, and that the fused plan gives the plain plan's
results (the property tests compare both with the reference evaluator at large)."""

from __future__ import annotations

import json

import pytest

from cq_service.compiler import load_and_compile
from cq_service.plan.explain import explain
from cq_service.plan.panes import PanedAggregateOp, fuse_panes
from cq_service.runner import run_pipeline
from tests.unit.plan.pipelines import HEADER, compile_queries


@pytest.fixture
def data_files(tmp_path):
    for name in ("s.parquet", "t.parquet", "r.csv"):
        (tmp_path / name).touch()  # compiling checks the files exist, not their contents


def fused(tmp_path, **queries: str) -> int:
    plan = fuse_panes(compile_queries(tmp_path, HEADER, **queries))
    return sum(isinstance(n.op, PanedAggregateOp) for n in plan.nodes)


@pytest.mark.usefixtures("data_files")
@pytest.mark.parametrize(
    ("queries", "count"),
    [
        ({"q": "SELECT a, COUNT(*), SUM(b), MAX(b), MIN(b), AVG(b) FROM S [Range 10 Slide 2] GROUP BY a"}, 1),
        ({"q": "SELECT COUNT(c), MIN(b) FROM S [Range 10 Slide 5]"}, 1),  # global, COUNT of strings
        ({"q": "SELECT c, COUNT(*) FROM S [Range 10 Slide 2] GROUP BY c HAVING MAX(a) > 1"}, 1),
        # COUNT, SUM, AVG alone: the plain aggregate is faster
        ({"q": "SELECT c, COUNT(*), SUM(a) FROM S [Range 10 Slide 2] GROUP BY c"}, 0),
        ({"q": "SELECT Istream(a, MAX(b)) FROM S [Range 10 Slide 2] GROUP BY a"}, 1),
        # two queries aggregating the same window: one paned operator each
        ({"q": "SELECT a, MAX(b) FROM S [Range 10 Slide 2] GROUP BY a",
          "p": "SELECT SUM(b), MIN(a) FROM S [Range 10 Slide 2]"}, 2),
        # no slide, slide 1, DISTINCT, MIN of strings, float keys or sums: not fused
        ({"q": "SELECT a, MAX(b) FROM S [Range 10] GROUP BY a"}, 0),
        ({"q": "SELECT a, MAX(b) FROM S [Range 10 Slide 1] GROUP BY a"}, 0),
        ({"q": "SELECT a, MAX(b), COUNT(DISTINCT b) FROM S [Range 10 Slide 2] GROUP BY a"}, 0),
        ({"q": "SELECT a, MIN(c) FROM S [Range 10 Slide 2] GROUP BY a"}, 0),
        ({"q": "SELECT a / 2.0, MAX(b) FROM S [Range 10 Slide 2] GROUP BY a / 2.0"}, 0),
        ({"q": "SELECT SUM(b * 0.5), MAX(b) FROM S [Range 10 Slide 2]"}, 0),
        # the window is also read by something else: it stays, and so does the aggregate
        ({"v": "SELECT a, b FROM S [Range 10 Slide 2]",
          "q": "SELECT a, MAX(b) FROM v GROUP BY a"}, 0),
    ],
)
def test_which_aggregates_are_fused(tmp_path, queries, count):
    assert fused(tmp_path, **queries) == count


@pytest.mark.usefixtures("data_files")
def test_an_adjustable_window_is_not_fused(tmp_path):
    header = HEADER
    text = header + (
        "  q:\n"
        "    cql: SELECT a, MAX(b) FROM S [Range 10 Slide 2] GROUP BY a\n"
        "    sink: {type: file, path: out/q.jsonl}\n"
        "    qos: {window: {S: [5, 10]}}\n"
    )
    path = tmp_path / "p.yaml"
    path.write_text(text, "utf-8")
    plan = load_and_compile(path).plan
    assert not any(isinstance(n.op, PanedAggregateOp) for n in fuse_panes(plan).nodes)


@pytest.mark.usefixtures("data_files")
def test_explain_shows_the_paned_operator(tmp_path):
    plan = fuse_panes(compile_queries(
        tmp_path, HEADER, q="SELECT a, MAX(b) FROM S [Range 10 Slide 2] GROUP BY a"))
    text = explain(plan)
    assert "paned aggregate group by 1 key(s): max over [Range 10 Slide 2]" in text
    assert "range window" not in text and "window [" not in text.split("paned")[0]


def test_fused_results_equal_the_plain_ones_with_big_sums(tmp_path):
    """Sums beyond int64 (NULL), timestamps, a global row from the first instant, gaps."""
    rows = []
    for i in range(60):
        t = i * 3 if i < 30 else 200 + i
        rows.append({"ts": t, "a": i % 4, "b": (2**62 if i % 4 == 0 else -(i * 7)), "z": t * 10})
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = (
        "version: 1\nname: t\ntime_unit: ms\nstreams:\n  S:\n"
        "    schema: {a: int, b: int, z: timestamp}\n    timestamp: ts\n"
        "    source: {type: file, path: s.jsonl, format: jsonl}\nqueries:\n"
    )
    queries = {
        "g": "SELECT a, COUNT(*), SUM(b), AVG(b), MIN(z), MAX(b) FROM S [Range 20 Slide 4] GROUP BY a",
        "n": "SELECT COUNT(*), SUM(b), MAX(z) FROM S [Range 7 Slide 3]",
        "r": "SELECT Rstream(a, MIN(b)) FROM S [Range 9 Slide 5] GROUP BY a HAVING COUNT(*) > 2",
    }
    for name, cql in queries.items():
        text += f"  {name}:\n    cql: \"{cql}\"\n    sink: {{type: file, path: out/{name}.jsonl}}\n"
    path = tmp_path / "p.yaml"
    path.write_text(text, "utf-8")
    outs = {}
    for panes in (False, True):
        compiled = load_and_compile(path)
        assert any(isinstance(n.op, PanedAggregateOp) for n in fuse_panes(compiled.plan).nodes)
        run_pipeline(compiled, panes=panes)
        outs[panes] = {q: (tmp_path / "out" / f"{q}.jsonl").read_text() for q in queries}
    assert outs[True] == outs[False]
    assert "null" in outs[True]["g"]  # a sum beyond int64
