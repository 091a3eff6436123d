"""Column pruning (plan/columns.py): the columns of each stream source the plan uses."""

from __future__ import annotations

import pytest

from cq_service.plan.explain import explain
from tests.unit.plan.pipelines import HEADER, compile_queries


@pytest.fixture(autouse=True)
def _data_files(tmp_path):
    for name in ("s.parquet", "t.parquet", "r.csv"):
        (tmp_path / name).touch()  # compiling checks the files exist, not their contents


def used(tmp_path, **queries: str) -> dict[str, tuple[str, ...]]:
    return compile_queries(tmp_path, **queries).source_columns


@pytest.mark.parametrize(
    ("cql", "s_cols"),
    [
        ("SELECT Rstream(a) FROM S [Now]", ("a",)),
        ("SELECT Rstream(a + 1) FROM S [Now] WHERE c = 'x'", ("a", "c")),
        ("SELECT COUNT(*) FROM S [Range 10]", ()),
        ("SELECT b, MAX(a) FROM S [Range 10] GROUP BY b", ("a", "b")),
        ("SELECT Rstream(a) FROM S [Partition By d Rows 2]", ("a", "d")),
        # Istream, Distinct and set operations compare whole tuples: all of their input.
        ("SELECT Istream(*) FROM S [Range 10]", ("a", "b", "c", "d")),
        ("SELECT * FROM S", ("a", "b", "c", "d")),  # implicit Istream
        ("SELECT Istream(a) FROM S [Range 10]", ("a",)),  # below a projection: only `a`
        ("SELECT DISTINCT a, b FROM S [Range 10]", ("a", "b")),
        ("SELECT a FROM S [Range 10] UNION SELECT a FROM S [Rows 3]", ("a",)),
        ("SELECT a, c FROM S [Range 10] EXCEPT ALL SELECT b, d FROM S [Rows 3]",
         ("a", "b", "c", "d")),
    ],
)
def test_single_stream_queries(tmp_path, cql, s_cols):
    cols = used(tmp_path, q=cql)
    assert cols["S"] == s_cols


def test_join_keeps_keys_residual_and_selected_columns_of_each_side(tmp_path):
    cols = used(
        tmp_path,
        q="SELECT Rstream(S.c, T.x) FROM S [Range 10], T [Rows 5] WHERE S.a = T.k AND S.b < T.x",
    )
    assert cols == {"S": ("a", "b", "c"), "T": ("k", "x")}


def test_relations_are_never_pruned(tmp_path):
    cols = used(tmp_path, q="SELECT Rstream(S.a) FROM S [Now], R WHERE S.a = R.k")
    assert "R" not in cols
    assert cols["S"] == ("a",)


def test_view_read_by_two_queries_needs_all_its_columns_and_unions_their_needs(tmp_path):
    view = "SELECT Rstream(a, c) FROM S [Now] WHERE b > 0"
    cols = used(
        tmp_path, v=view, q1="SELECT Rstream(a) FROM v [Now]", q2="SELECT Rstream(d) FROM S [Now]"
    )
    # v emits (a, c) whole (a view boundary); q2 reads d from the same, shared source.
    assert cols["S"] == ("a", "b", "c", "d")
    cols = used(tmp_path, v=view, q1="SELECT Rstream(a) FROM v [Now]")
    assert cols["S"] == ("a", "b", "c")


def test_subquery_side_keeps_what_it_reads(tmp_path):
    cols = used(
        tmp_path, q="SELECT Rstream(c) FROM S [Range 10] WHERE a = (SELECT MAX(x) FROM T [Range 10])"
    )
    assert cols == {"S": ("a", "c"), "T": ("x",)}


def test_late_elements_to_dead_letter_keep_every_column(tmp_path):
    header = HEADER.replace("    source: {type: file, path: s.parquet}",
                            "    late: dead_letter\n    source: {type: file, path: s.parquet}")
    plan = compile_queries(tmp_path, header, q="SELECT Rstream(a) FROM S [Now]")
    assert "S" not in plan.source_columns
    assert plan.source_columns["T"] == ()


def test_a_heartbeat_field_is_read_even_when_no_query_uses_it(tmp_path):
    header = HEADER.replace("    source: {type: file, path: s.parquet}",
                            "    heartbeat: {field: b, offset: 5}\n"
                            "    source: {type: file, path: s.parquet}")
    plan = compile_queries(tmp_path, header, q="SELECT Rstream(a) FROM S [Now]")
    assert plan.source_columns["S"] == ("a", "b")


def test_unread_source_uses_nothing_and_explain_shows_it(tmp_path):
    plan = compile_queries(tmp_path, q="SELECT Rstream(a, b) FROM S [Now]")
    assert plan.source_columns["T"] == ()
    text = explain(plan)
    assert "columns used: a, b; unused: c, d" in text
    assert "columns used: none; unused: k, x, y" in text
