"""`cq bench kafka`'s expected output counts: by brute force, and by our engine over files of
the same events (the Kafka runs are tests/integration/test_bench_kafka.py)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from cq_service.bench.kafka_bench import (
    AGG_SETTLED_MS,
    FILTER_MODULUS,
    QUERIES,
    SCHEMAS,
    STREAM_NAMES,
    Cell,
    Row,
    agg_cutoff_ms,
    cq_pipeline,
    expected_counts,
    generate,
    generate_nexmark,
    report,
)
from cq_service.compiler import compile_pipeline
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline

EVENTS = 6_000


@pytest.fixture(scope="module")
def data():
    d = generate(EVENTS, 3)
    d["nexmark"] = generate_nexmark(EVENTS, 3)
    return d


def test_expected_counts_by_brute_force(data) -> None:
    bids, asks = data["bids"], data["asks"]
    b_rows = list(zip(bids["auction"].tolist(), bids["dateTime"].tolist(), strict=True))
    by_auction = defaultdict(list)
    for auction, t in zip(asks["auction"].tolist(), asks["dateTime"].tolist(), strict=True):
        by_auction[auction].append(t)
    join = sum(1 for auction, t in b_rows for u in by_auction[auction] if abs(t - u) <= 1000)
    times = [t for _, t in b_rows]
    agg = sum(
        len({a for a, t in b_rows if t0 - 9999 <= t <= t0})
        for t0 in range(min(times), max(times) - AGG_SETTLED_MS + 1, 1000)
    )
    got = expected_counts(data)
    assert got["pass-through"] == EVENTS
    assert got["filter"] == sum(1 for p in bids["price"].tolist() if p % FILTER_MODULUS == 0)
    assert got["join"] == join
    assert got["sliding-agg"] == agg
    assert got["nexmark-q1"] == len(data["nexmark"]["id"])


def _file_pipeline(query: str, folder: Path, data) -> Path:
    """The query over jsonl files of the events, its result to a jsonl file."""
    q = QUERIES[query]
    streams = []
    for kind in q.inputs:
        path = folder / f"{kind}.jsonl"
        cols = data[kind]
        names = [k for k in cols if not (k == "id" and kind == "nexmark")]
        with path.open("w") as f:
            for row in zip(*(cols[k].tolist() for k in names), strict=True):
                f.write(json.dumps(dict(zip(names, row, strict=True))) + "\n")
        streams.append(f"  {STREAM_NAMES[kind]}:\n    schema: {SCHEMAS[kind]}\n"
                       f"    timestamp: dateTime\n    source: {{type: file, path: {path}}}\n")
    text = ("version: 1\nname: t\ntime_unit: ms\nstreams:\n" + "".join(streams)
            + f"queries:\n  q:\n    cql: {json.dumps(q.cql)}\n"
            + f"    sink: {{type: file, path: {folder / 'out.jsonl'}}}\n")
    (folder / "p.yaml").write_text(text)
    return folder / "p.yaml"


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_cq_over_files_gives_the_expected_counts(query: str, data, tmp_path: Path) -> None:
    run_pipeline(compile_pipeline(load_pipeline(_file_pipeline(query, tmp_path, data))))
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    if query == "sliding-agg":
        n = sum(1 for r in rows if r["_ts"] <= agg_cutoff_ms(data))
    elif query == "nexmark-q7":
        n = len({(r["_ts"] // 60_000, r["auction"], r["price"], r["bidder"]) for r in rows})
    else:
        n = len(rows)
    assert n == expected_counts(data)[query]


def test_kafka_pipeline_loads(tmp_path: Path) -> None:
    for name, q in QUERIES.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(cq_pipeline(q, {"bids": "b", "asks": "a", "nexmark": "n"}, "o",
                                    "127.0.0.1:9092", "kafka-python"))
        spec = load_pipeline(path)
        assert spec.queries["q"].sink.type == "kafka"


def test_report_marks_targets() -> None:
    rows = [Row("pass-through", 1000, 1000, {
        "cq": Cell(seconds=[1.0], outputs=1000, compared=1000, agrees=True),
        "spark": Cell(seconds=[2.0], outputs=1000, compared=1000, agrees=True),
        "quix": Cell(seconds=[4.0], outputs=1000, compared=1000, agrees=True),
    })]
    text = report(rows, {"events": 1000, "asks": 100, "seed": 0, "repeat": 1,
                         "machine": "m", "date": "d"})
    assert "missed (2.00×, 1.500× short)" in text  # cq ÷ Spark
    assert "met (4.00×)" in text  # cq ÷ Quix
    assert "missed (300.00× short)" in text  # 1 k msg/s against 300 k
