"""`cq bench kafka`'s PyFlink peer against the real broker: on the same topics it writes the
same rows as cq (NEXMark q1: the values, as bags), and the bench counts its sliding
aggregate's settled windows as expected. Needs .venv-flink (`make bench-deps`; or
CQ_FLINK_PYTHON); no timing is checked."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from cq_service.bench import kafka_bench
from cq_service.bench.kafka_bench import (
    QUERIES,
    create_topic,
    delete_topics,
    ensure_input,
    generate,
    generate_nexmark,
    run_benchmark,
)
from cq_service.bench.kafka_topics import messages

EVENTS = 6_000
SEED = 11
_REPO = Path(__file__).resolve().parents[2]
COLUMNS = {"nexmark-q1": ("auction", "price", "bidder", "dateTime")}


@pytest.fixture(scope="module")
def flink_python() -> None:
    """PyFlink's interpreter: `make test` builds .venv-flink first (bench-deps), so its
    absence is a broken set-up, not a reason to pass without running."""
    python = Path(kafka_bench._flink_python())
    assert python.exists(), f"{python} missing: run `make bench-deps` or set CQ_FLINK_PYTHON"


def _rows(bootstrap: str, topic: str, columns: tuple[str, ...]) -> Counter:
    return Counter(tuple(v[c] for c in columns) for v in messages(bootstrap, topic))


def test_pyflink_writes_what_cq_writes(kafka_bootstrap: str, tmp_path: Path,
                                       flink_python: None) -> None:
    data = generate(EVENTS, SEED)
    data["nexmark"] = generate_nexmark(EVENTS, SEED)
    outs = []
    try:
        topics = ensure_input(kafka_bootstrap, EVENTS, SEED, data, say=lambda _s: None)
        kafka_bench._fetch_flink_jars()
        for name, columns in COLUMNS.items():
            got = {}
            for engine in ("cq", "pyflink"):
                out = f"cqbench-test-{engine}-{name}-{os.getpid()}"
                outs.append(out)
                create_topic(kafka_bootstrap, out, 2, append_time=True)
                cmd = kafka_bench.command(engine, QUERIES[name], topics, out, kafka_bootstrap,
                                          tmp_path, 0)
                done = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=str(_REPO)),
                                      capture_output=True, text=True, timeout=600)
                assert done.returncode == 0, done.stderr[-3000:]
                got[engine] = _rows(kafka_bootstrap, out, columns)
            assert got["pyflink"] == got["cq"], name
            assert got["cq"].total() > 0, name
    finally:
        delete_topics(kafka_bootstrap, outs)
        delete_topics(kafka_bootstrap, [f"cqbench-{kind}-{EVENTS}-{SEED}"
                                        for kind in ("bids", "asks", "nexmark")])


def test_pyflink_sliding_aggregate_counts_as_expected(kafka_bootstrap: str, tmp_path: Path,
                                                      flink_python: None) -> None:
    try:
        rows = run_benchmark(
            bootstrap=kafka_bootstrap, events=EVENTS, seed=SEED, queries=("sliding-agg",),
            engines=("pyflink",), repeat=1, work=tmp_path, say=lambda _s: None,
        )
    finally:
        delete_topics(kafka_bootstrap, [f"cqbench-{kind}-{EVENTS}-{SEED}"
                                        for kind in ("bids", "asks")])
    cell = rows[0].cells["pyflink"]
    assert cell.agrees, cell.note
    assert cell.compared == rows[0].expected > 0
