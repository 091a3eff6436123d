"""`cq bench linear-road`: both runs validated, state per view reported, on a one-minute input
(the --quick form is 300 s: too slow for the unit suite on a shared machine)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cq_service.bench.linear_road.bench import VIEWS, bench, with_constraints
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
