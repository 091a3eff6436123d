"""The shared-join bench's pipeline text (paper 002 §5): seven queries, one policy.

`resources: {shared_join: …}` is not in the spec yet, so the full text is checked as YAML
structure only; without that line it must load and run as a pipeline today."""

from __future__ import annotations

import json

import pytest
import yaml

from cq_service.bench.shared_joins.pipeline import POLICIES, pipeline_yaml, query_cql, query_name
from cq_service.bench.shared_joins.workload import DISTRIBUTIONS, TimeScale, generate
from cq_service.compiler import compile_pipeline
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline
from cq_service.spec.loader import load_pipeline_text

WINDOWS = DISTRIBUTIONS["small-large"]
UNITS = tuple(TimeScale().units(w) for w in WINDOWS)


def test_query_text_and_strict_window():
    # |ts(a) − ts(b)| < W units ⇔ [Range W − 1] (CQL's range includes its boundary)
    assert query_cql(1000) == "SELECT Istream(*) FROM A [Range 999], B [Range 999] WHERE A.k = B.k"
    assert query_name(600) == "w600" and query_name(0.5) == "w0_5"
    with pytest.raises(ValueError):
        query_cql(0)


@pytest.mark.parametrize("policy", POLICIES)
def test_structure(policy):
    doc = yaml.safe_load(pipeline_yaml(WINDOWS, UNITS, policy))
    assert doc["resources"] == {"shared_join": policy}
    assert doc["time_unit"] == "ms" and set(doc["streams"]) == {"A", "B"}
    assert doc["streams"]["A"]["source"] == {"type": "file", "path": "A.csv", "format": "csv"}
    assert list(doc["queries"]) == ["w1", "w5", "w15", "w300", "w510", "w570", "w600"]
    assert doc["queries"]["w600"]["cql"] == query_cql(600_000)
    assert doc["queries"]["w1"]["sink"] == {
        "type": "file",
        "path": "out/w1.jsonl",
        "format": "jsonl",
    }


def test_options_and_errors():
    doc = yaml.safe_load(
        pipeline_yaml(
            [1, 2],
            [10, 20],
            "lwo",
            name="x",
            time_unit="us",
            sources={"A": "a.csv", "B": "b.csv"},
            sink="blackhole",
        )
    )
    assert doc["name"] == "x" and doc["time_unit"] == "us"
    assert doc["streams"]["B"]["source"]["path"] == "b.csv"
    assert doc["queries"]["w2"]["sink"] == {"type": "blackhole"}
    with pytest.raises(ValueError):
        pipeline_yaml([1], [10], "greedy")
    with pytest.raises(ValueError):
        pipeline_yaml([1, 2], [10], "mqt")


def test_loads_without_the_new_key(tmp_path):
    for s in ("A", "B"):
        (tmp_path / f"{s}.csv").write_text("ts,k,v\n0,1,0\n")
    text = pipeline_yaml(WINDOWS, UNITS, "off")
    assert 'resources: {shared_join: "off"}\n' in text  # a bare off is a YAML boolean
    text = text.replace('resources: {shared_join: "off"}\n', "")
    spec = load_pipeline_text(text, tmp_path / "pipeline.yaml")
    assert len(spec.queries) == 7


def test_each_query_alone_gives_the_strict_window_join(tmp_path):
    """Planned alone (no shared_join line), query w_i's pairs are exactly those with equal keys
    less than W_i units apart, each at max(ts(a), ts(b)): the paper's window (§3.1.1)."""
    w = generate([1, 2], new_tuples=60, keys=5, scale=TimeScale(20, "ms"), seed=3)
    w.write_csv(tmp_path)
    text = pipeline_yaml(w.windows, w.window_units, "off").replace(
        'resources: {shared_join: "off"}\n', ""
    )
    (tmp_path / "p.yaml").write_text(text)
    run_pipeline(compile_pipeline(load_pipeline(tmp_path / "p.yaml")))
    a, b = w.streams["A"], w.streams["B"]
    for seconds, units in zip(w.windows, w.window_units, strict=True):
        rows = [json.loads(x) for x in (tmp_path / f"out/{query_name(seconds)}.jsonl").open()]
        expected = sorted(
            (i, j)
            for i in range(len(a))
            for j in range(len(b))
            if a.k[i] == b.k[j] and abs(int(a.ts[i]) - int(b.ts[j])) < units
        )
        assert expected and sorted((r["A.v"], r["B.v"]) for r in rows) == expected
        assert all(r["_ts"] == max(a.ts[r["A.v"]], b.ts[r["B.v"]]) for r in rows)
