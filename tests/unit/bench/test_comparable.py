"""The benchmark's agreement check: what each engine's result is reduced to, and what counts as
a disagreement (a false 'agree' here would let a wrong peer, or a wrong engine, pass CI)."""

from __future__ import annotations

import pyarrow as pa

from cq_service.bench.comparable import compare, from_cql, restrict


def _cq(rows: list[tuple], names: list[str]) -> pa.Table:
    """Our engine's sink output: _ts, _op, then the result columns."""
    cols = list(zip(*rows)) if rows else [[] for _ in names]
    return pa.table([pa.array(c) for c in cols], names=["_ts", "_op", *names])


def test_bags_of_rows_compare_regardless_of_order():
    ours = from_cql("q2", _cq([(1, "+", 1007, 5), (2, "+", 1020, 7)], ["auction", "price"]))
    theirs = pa.table({"auction": [1020, 1007], "price": [7, 5]})
    assert compare("q2", "spark", ours, theirs) is None


def test_a_changed_value_a_missing_row_and_wrong_columns_are_disagreements():
    ours = from_cql("q2", _cq([(1, "+", 1007, 5), (2, "+", 1020, 7)], ["auction", "price"]))
    changed = compare("q2", "flink", ours, pa.table({"auction": [1007, 1020], "price": [5, 8]}))
    assert changed is not None and "row 1" in changed.reason
    missing = compare("q2", "flink", ours, pa.table({"auction": [1007], "price": [5]}))
    assert missing is not None and "1 rows, expected 2" in missing.reason
    renamed = compare("q2", "flink", ours, pa.table({"a": [1007, 1020], "price": [5, 7]}))
    assert renamed is not None and "columns" in renamed.reason


def test_duplicates_count_as_a_bag():
    ours = from_cql("q2", _cq([(1, "+", 1007, 5), (1, "+", 1007, 5)], ["auction", "price"]))
    assert compare("q2", "spark", ours, pa.table({"auction": [1007], "price": [5]})) is not None
    assert compare("q2", "spark", ours, pa.table({"auction": [1007, 1007], "price": [5, 5]})) is None


def test_floats_agree_to_rounding_only():
    ours = pa.table({"category": [10], "avg": [1234.5]})
    assert compare("q4", "spark", ours, pa.table({"category": [10], "avg": [1234.5 * (1 + 1e-12)]})) is None
    assert compare("q4", "spark", ours, pa.table({"category": [10], "avg": [1234.6]})) is not None


def test_running_averages_reduce_to_the_last_value_per_key():
    # q4 is Istream(C.id, AVG(...)): the newest average per category counts.
    out = _cq(
        [(5, "+", 10, 1.0), (9, "+", 11, 4.0), (12, "+", 10, 2.5), (12, "-", 10, 1.0)],
        ["id", "avg"],
    )
    got = from_cql("q4", out).sort_by("category").to_pydict()
    assert got == {"category": [10, 11], "avg": [2.5, 4.0]}


def test_rstream_of_a_sliding_window_keeps_one_result_per_boundary():
    # q7 repeats the boundary's result at every instant until the next boundary.
    out = _cq(
        [
            (60_000, "+", 1, 9, 100), (60_005, "+", 1, 9, 100),
            (120_000, "+", 2, 7, 200), (120_000, "+", 3, 7, 201), (179_999, "+", 2, 7, 200),
            (179_999, "+", 3, 7, 201),
        ],
        ["auction", "price", "bidder"],
    )
    got = from_cql("q7", out).to_pydict()
    assert got == {
        "t0": [60_000, 120_000, 120_000], "auction": [1, 2, 3], "price": [9, 7, 7],
        "bidder": [100, 200, 201],
    }


def test_only_boundaries_up_to_the_end_of_input_count():
    table = pa.table({"t0": [60_000, 120_000, 180_000], "auction": [1, 2, 3]})
    assert restrict("q5", table, 120_000).column("t0").to_pylist() == [60_000, 120_000]
    assert restrict("q2", table, 0).num_rows == 3
