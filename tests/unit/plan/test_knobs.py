"""Which windows a query's QoS makes adjustable (plan/knobs.py), as `cq explain` shows them:
the query's own sized Range windows, Γ at the finest rung, never shared with other queries,
never a view's."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from cq_service.compiler import load_and_compile
from cq_service.plan.explain import explain
from tests.unit.plan.pipelines import HEADER


@pytest.fixture(autouse=True)
def _data_files(tmp_path):
    for name in ("s.parquet", "t.parquet", "r.csv"):
        (tmp_path / name).touch()


def windows(tmp_path, queries: dict[str, dict]) -> list[str]:
    """The plan's window operators as `cq explain` describes them, with their queries."""
    doc = {
        name: {**q, **({} if name.startswith("v") else
                       {"sink": {"type": "file", "path": f"out/{name}.jsonl"}})}
        for name, q in queries.items()
    }
    path = tmp_path / "p.yaml"
    path.write_text(HEADER + textwrap.indent(yaml.safe_dump(doc, sort_keys=False), "  "))
    text = explain(load_and_compile(path).plan)
    return [
        ln.split("  <-")[0].split(" ", 3)[-1] + "  " + ln.rsplit("  ", 1)[-1]
        for ln in text.splitlines() if " window " in ln
    ]


def test_a_window_range_makes_the_querys_range_windows_adjustable(tmp_path) -> None:
    cql = "SELECT * FROM S [Range 10] AS X, T [Range 20], T [Rows 3] AS U WHERE X.a = T.k"
    got = windows(tmp_path, {"q": {"cql": cql, "qos": {"window": {"T": [5, 30]}}}})
    assert got == [
        "window [Range 10]  (q)",
        "window [Range 20] (adjustable by q's qos)  (q)",
        "window [Rows 3]  (q)",
    ]
    got = windows(tmp_path, {"q": {"cql": cql, "qos": {"window": [5, 30]}}})
    assert [g.endswith("qos)  (q)") for g in got] == [True, True, False]


def test_a_granularity_ladder_puts_gamma_on_every_sized_window(tmp_path) -> None:
    cql = "SELECT COUNT(*) FROM S [Range 100] AS X, S [Now] AS Y WHERE X.a = Y.a"
    got = windows(tmp_path, {"q": {"cql": cql, "qos": {"granularity": [10, 50]}}})
    assert got == ["window [Range 100] Γ(10) (adjustable by q's qos)  (q)", "window [Range 0]  (q)"]
    got = windows(tmp_path, {"q": {"cql": cql, "qos": {"granularity": [1, 50]}}})
    assert got[0] == "window [Range 100] (adjustable by q's qos)  (q)"  # Γ(1) is no rounding


def test_adjustable_windows_are_not_shared_and_views_keep_theirs(tmp_path) -> None:
    same = "SELECT COUNT(*) FROM S [Range 10]"
    got = windows(tmp_path, {
        "q1": {"cql": same, "qos": {"window": [5, 20]}},
        "q2": {"cql": same},
        "q3": {"cql": same},
    })
    assert got == [
        "window [Range 10] (adjustable by q1's qos)  (q1)",
        "window [Range 10]  shared by q2, q3",
    ]
    got = windows(tmp_path, {
        "v": {"cql": "SELECT a FROM S [Range 10]"},
        "q": {"cql": "SELECT * FROM v, T [Range 7] WHERE v.a = T.k", "qos": {"window": [5, 20]}},
    })
    assert got == ["window [Range 10]  shared by v, q", "window [Range 7] (adjustable by q's qos)  (q)"]


def test_equal_adjustable_windows_on_different_items_stay_apart(tmp_path) -> None:
    """Each is adjusted and logged by its own FROM item, so one operator cannot serve both
    (a scalar subquery over the same stream and window as its outer query)."""
    cql = "SELECT X.a, (SELECT MAX(Y.a) FROM S [Range 10] AS Y) AS m FROM S [Range 10] AS X"
    got = windows(tmp_path, {"q": {"cql": cql, "qos": {"window": [1, 40]}}})
    assert got == ["window [Range 10] (adjustable by q's qos)  (q)"] * 2
    shared = windows(tmp_path, {"q": {"cql": cql}})
    assert shared == ["window [Range 10]  (q)"]  # without qos, one operator serves both
