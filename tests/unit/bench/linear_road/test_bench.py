"""`cq bench linear-road`: both runs validated, state per view reported, on a one-minute input
(the --quick form is 300 s: too slow for the unit suite on a shared machine)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cq_service.bench.linear_road.bench import (
    VIEWS,
    bench,
    clustering_k,
    per_car_bound,
    with_constraints,
)
from cq_service.bench.linear_road.check import PIPELINE
from cq_service.bench.linear_road.generator import GeneratorConfig, generate


def test_with_constraints_declares_them_on_input():
    text = with_constraints(PIPELINE.read_text())
    assert "{kind: ca, attribute: vid, k: auto}" in text
    with pytest.raises(ValueError):
        with_constraints("streams: {}")


def test_bench_report(tmp_path):
    rows = pa.concat_tables(generate(GeneratorConfig(duration=60, seed=0))).to_pylist()
    report = bench(rows, tmp_path / "work", 60)
    assert report["validated"] == {"without": True, "with": True}
    assert set(report["views"]) == set(VIEWS)
    assert report["views"]["CurCarSeg"]["rows_without"] > 0
    assert report["views"]["CarExitStr"]["rows_without"] == 0


def test_with_constraints_takes_the_ca_k():
    assert "{kind: ca, attribute: vid, k: 12}" in with_constraints(PIPELINE.read_text(), 12)


def test_clustering_k():
    rows = [{"vid": v} for v in (1, 2, 1, 3, 2, 1)]
    assert clustering_k(rows) == 3  # 2, 3 and 2 after 1's first, before its last


def test_bench_report_with_the_true_ca_k(tmp_path):
    """CA(k) on vid at the input's own k: the partitioned windows use it, nothing breaks it,
    and both runs equal the validator."""
    rows = pa.concat_tables(generate(GeneratorConfig(duration=60, seed=0))).to_pylist()
    report = bench(rows, tmp_path / "work", 60, "true")
    assert report["validated"] == {"without": True, "with": True}
    assert report["ca_vid_true_k"] == clustering_k(rows)
    used = [r for r in report["reductions_in_use"] if "CA k=" in r]
    assert used and all(" 0 violations, 0 missed" in r for r in used)


def test_per_car_bound():
    """Cars 1 and 2 overlap, 3 comes after 1 left: at most two on the road of three seen;
    balance queries (type 2) count for no car."""
    seq = [(0, 1), (0, 2), (2, 1), (0, 1), (0, 2), (0, 3), (0, 3), (2, 9)]
    rows = [{"type": ty, "vid": v} for ty, v in seq]
    assert per_car_bound(rows) == {"cars_seen": 3, "peak_cars_on_road": 2, "ratio": 0.667}
    assert per_car_bound([])["ratio"] is None
