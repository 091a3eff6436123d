"""`cq bench constraints`: NEXMark queries without and with a rids constraint at the input's
true k — identical outputs, q3's state smaller; `true_k` counts join distances as the join
does."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from cq_service.bench.cli import bench_app
from cq_service.bench.nexmark_constraints import CASES, bench, case_true_k, true_k


def test_true_k_counts_child_arrivals_after_the_parent():
    # parents (ts, key); children (ts, key): child 1 first (0), child 2 the 2nd arrival after
    # its parent at ts 1 (children at 2 and 3), key 9 never comes
    assert (
        true_k(np.array([5, 1, 1]), np.array([1, 2, 9]), np.array([0, 2, 3]), np.array([1, 7, 2]))
        == 2
    )
    assert true_k(np.array([5]), np.array([1]), np.array([0]), np.array([1])) == 0
    assert true_k(np.array([], np.int64), np.array([], np.int64), np.array([0]), np.array([1])) == 0


def test_sellers_registered_first_so_rids_zero_holds():
    (q3,) = [c for c in CASES if c.query == "q3"]
    assert case_true_k(q3, 5_000) == 0


def test_quick_q3_drops_state_with_identical_output():
    out = bench(["q3", "q8"], events=5_000)
    by = {r["query"]: r for r in out["queries"]}
    assert out["all_identical"] and set(by) == {"q3", "q8"}
    q3 = by["q3"]
    assert q3["true_k"] == 0 and q3["results"] > 0 and q3["identical"]
    assert q3["bytes_with"] < q3["bytes_without"] and q3["ratio"] < 1
    assert q3["reduction"]["dropped"] > 0 and q3["reduction"]["missed"] == 0


def test_cli_quick_json():
    result = CliRunner().invoke(bench_app, ["constraints", "--quick", "--json", "--query", "q3"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["quick"] and out["events"] == 40_000 and out["all_identical"]
    assert [r["query"] for r in out["queries"]] == ["q3"]


def test_unknown_query_is_an_error():
    result = CliRunner().invoke(bench_app, ["constraints", "--quick", "--query", "q5"])
    assert result.exit_code == 2 and "no constraint case" in result.output
