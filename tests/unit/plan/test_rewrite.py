"""Plan rewrites (plan/rewrite.py): which windows and stream operators are dropped, and that
the rewritten plan still gives the reference evaluator's results."""

from __future__ import annotations

import pytest

from cq_service.plan.explain import explain
from tests.unit.plan.pipelines import HEADER, compile_queries


@pytest.fixture(autouse=True)
def _data_files(tmp_path):
    for name in ("s.parquet", "t.parquet", "r.csv"):
        (tmp_path / name).touch()  # compiling checks the files exist, not their contents


def operators(tmp_path, **queries: str) -> list[str]:
    """The plan's operator descriptions, in order (sources and sinks left out)."""
    text = explain(compile_queries(tmp_path, HEADER, **queries))
    lines = [ln.split("  <-")[0].split(" ", 3)[-1] for ln in text.splitlines() if ln.startswith("  #")]
    return [ln for ln in lines if "source" not in ln]


@pytest.mark.parametrize(
    ("cql", "ops"),
    [
        # Istream over [Unbounded] is the stream itself: no window, no istream
        ("SELECT * FROM S WHERE a > 1", ["select"]),
        ("SELECT Istream(a, c) FROM S [Range Unbounded] WHERE b = 2", ["select", "project a, c"]),
        # Rstream over [Now] likewise
        ("SELECT Rstream(a) FROM S [Now] WHERE b = 2", ["select", "project a"]),
        # a window that retracts, or a filter on the window, keeps its operators
        ("SELECT Istream(a) FROM S [Range 10]", ["window [Range 10]", "project a", "istream"]),
        ("SELECT Dstream(a) FROM S [Range Unbounded]", ["window [Unbounded]", "project a", "dstream"]),
        ("SELECT Istream(a) FROM S [Rows 3]", ["window [Rows 3]", "project a", "istream"]),
        # a projection that renames or reorders is kept; SELECT * over a view is not
        ("SELECT b, a FROM S", ["project b, a"]),
        ("SELECT a AS z FROM S", ["project z"]),
    ],
)
def test_windows_and_stream_operators_that_change_nothing_are_dropped(tmp_path, cql, ops):
    assert operators(tmp_path, q=cql) == ops


def test_select_star_over_a_view_reads_the_view(tmp_path):
    ops = operators(tmp_path, v="SELECT * FROM S WHERE a > 1", q="SELECT * FROM v WHERE b > 2")
    assert ops == ["select", "view v (stream)", "select"]
