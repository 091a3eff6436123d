"""`cq bench kafka`'s expected output counts: by brute force, and by our engine over files of
the same events (the Kafka runs are tests/integration/test_bench_kafka.py)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from cq_service.bench.kafka_bench import (
    AGG_SETTLED_MS,
    BOUNDARY_FIELDS,
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
)
from cq_service.bench.kafka_latency import latencies, paced_order
from cq_service.bench.kafka_report import report
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
    # q5: at each minute boundary t0 from the first bid to the last, the auctions with the
    # most bids in [t0 - 60 min, t0].
    nex = list(zip(data["nexmark"]["dateTime"].tolist(), data["nexmark"]["auction"].tolist(),
                   strict=True))
    q5 = 0
    for t0 in range(-(-min(t for t, _ in nex) // 60_000) * 60_000, max(t for t, _ in nex) + 1,
                    60_000):
        per = defaultdict(int)
        for t, a in nex:
            if t0 - 3_600_000 <= t <= t0:
                per[a] += 1
        if per:
            q5 += sum(1 for n in per.values() if n == max(per.values()))
    assert q5 > 0
    assert got["nexmark-q5"] == q5


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
    elif query == "nexmark-q5":
        n = len({(r["_ts"] // 60_000, r["auction"]) for r in rows})
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


def test_report_shows_latency_and_its_target() -> None:
    cell = Cell(seconds=[1.0], spans=[0.5], outputs=4, compared=4, agrees=True,
                latency_rate=1000.0, p50_ms=40.0, p99_ms=250.0, latency_samples=4)
    assert cell.sustained(1000) == 2000.0  # first to last output
    assert Cell(seconds=[10.0], spans=[0.5]).sustained(1000) == 100.0  # a burst: whole process
    text = report([Row("nexmark-q5", 1000, 4, {"cq": cell})],
                  {"events": 1000, "asks": 100, "seed": 0, "repeat": 1, "machine": "m",
                   "date": "d", "latency_grace": 5.0})
    assert "| 1 k | 40 / 250 ms (4 results) |" in text
    assert "missed (250 ms, 2.5× over)" in text
    assert "every input partition had delivered an event with time ≥ t" in text


def _bids(times: list[int], auctions: list[int], prices: list[int]) -> dict:
    n = len(times)
    return {"id": np.arange(n), "auction": np.array(auctions), "price": np.array(prices),
            "bidder": np.zeros(n, dtype=np.int64), "dateTime": np.array(times)}


def test_latency_of_record_at_a_time_outputs() -> None:
    # Message i on partition i % 2; two inputs share (auction, price): matched in order.
    data = {"bids": _bids([0, 0, 1, 1], [5, 5, 6, 7], [10, 10, 11, 12])}
    appended = {"bids": np.array([100, 101, 102, 103])}
    outputs = [{"auction": 7, "price": 12}, {"auction": 5, "price": 10},
               {"auction": 5, "price": 10}, {"auction": 6, "price": 11}]
    stamps = np.array([110, 120, 130, 140])
    got = latencies("pass-through", data, appended, stamps, outputs)
    assert sorted(got.tolist()) == sorted([110 - 103, 120 - 100, 130 - 101, 140 - 102])


def test_latency_of_window_results_counts_from_every_partition_reaching_the_boundary() -> None:
    # Partition 0: times 0, 1000, 3000 (appended 100, 102, 104); partition 1: 0, 2000, 2000
    # (101, 103, 105). Boundary 1000: partition 0 at 102, partition 1 at 103 -> 103.
    data = {"bids": _bids([0, 0, 1000, 2000, 3000, 2000], [1] * 6, [1] * 6)}
    appended = {"bids": np.array([100, 101, 102, 103, 104, 105])}
    outputs = [{"_ts": 1000, "auction": 1, "n": 3}, {"t0": 3000, "auction": 1, "n": 1},
               {"_ts": 2000, "auction": 1, "n": 2}]
    got = latencies("sliding-agg", data, appended, np.array([150, 160, 170]), outputs)
    # 3000: partition 1 never reaches it, so that result is not counted.
    assert got.tolist() == [150 - 103, 170 - 104]


def test_latency_of_the_join_is_from_the_later_input() -> None:
    data = {"bids": _bids([0, 0], [1, 1], [1, 1]), "asks": _bids([0], [1], [1])}
    appended = {"bids": np.array([100, 300]), "asks": np.array([200])}
    outputs = [{"bid": 0, "ask": 0}, {"bid": 1, "ask": 0}]
    got = latencies("join", data, appended, np.array([250, 310]), outputs)
    assert got.tolist() == [50, 10]


def test_q7_rows_repeated_by_rstream_count_once() -> None:
    t = 1_436_918_400_000  # a minute boundary
    data = {"nexmark": _bids([t, t, t + 5, t + 5], [1, 2, 1, 2], [9, 9, 9, 9])}
    appended = {"nexmark": np.array([100, 101, 102, 103])}
    row = {"auction": 1, "price": 9, "bidder": 0}
    outputs = [{"_ts": t, **row}, {"_ts": t + 5, **row}]  # the repeat at t + 5
    got = latencies("nexmark-q7", data, appended, np.array([120, 130]), outputs,
                    BOUNDARY_FIELDS["nexmark-q7"])
    assert got.tolist() == [120 - 101]


def test_paced_order_keeps_each_stream_in_order() -> None:
    data = {"bids": _bids([0, 0, 5], [1] * 3, [1] * 3), "asks": _bids([0, 3], [1] * 2, [1] * 2)}
    kind, index = paced_order(data, ("bids", "asks"))
    assert list(zip(kind.tolist(), index.tolist(), strict=True)) == [
        (0, 0), (0, 1), (1, 0), (1, 1), (0, 2)]
