"""Backfill then handover, on the real broker: history into Kafka, `cq archive`, `cq backfill
--sink --handover` to T2, then `cq serve` takes the queries over while more records arrive.
Every sink topic must then hold exactly what `cq run` gives over all the records (per instant,
as bags): nothing missing at the boundary, nothing twice."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from cq_service.batch.archive import archive_pipeline
from cq_service.batch.spark import session
from cq_service.catalog import Catalog
from cq_service.compiler import load_and_compile
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline
from tests.integration.kafka_workload import Results
from tests.integration.worker_process import Worker, free_port

PARTITIONS = 2
N = 600
HISTORY = 350  # records before the backfill; the rest arrive once the worker runs
FLUSH = 10 * N + 500  # a last record per partition this late completes every earlier instant
QUERIES = {
    # key path: a keyed sliding aggregate
    "counts": "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM S [Range 100 Slide 50] GROUP BY k",
    # key path, stateless
    "big": "SELECT * FROM S WHERE v > 80",
    # single path: a global aggregate over a Rows window (state from the archive's start)
    "last5": "SELECT SUM(v) AS s, COUNT(*) AS n FROM S [Rows 5]",
}


def records() -> list[dict]:
    import random

    rnd = random.Random(11)
    rows = [{"k": i % 4, "v": rnd.randrange(100), "ts": 10 * i + rnd.randrange(10)}
            for i in range(N)]
    rows.sort(key=lambda r: r["ts"])
    return rows + [{"k": 100 + p, "v": 0, "ts": FLUSH} for p in range(PARTITIONS)]


def pipeline_text(source: str, sinks: dict[str, str]) -> str:
    lines = ["version: 1", "name: handover", "time_unit: ms", "streams:", "  S:",
             "    schema: {k: int, v: int, ts: int}", "    timestamp: ts",
             f"    source: {source}", "queries:"]
    for name, cql in QUERIES.items():
        lines += [f"  {name}:", f"    cql: {json.dumps(cql)}", f"    sink: {sinks[name]}"]
    return "\n".join(lines) + "\n"


def expected(tmp: Path, data: list[dict]) -> dict[str, Counter]:
    folder = tmp / "expected"
    folder.mkdir()
    (folder / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    sinks = {q: f"{{type: file, path: out/{q}.jsonl}}" for q in QUERIES}
    (folder / "p.yaml").write_text(pipeline_text("{type: file, path: s.jsonl}", sinks))
    run_pipeline(load_and_compile(folder / "p.yaml"))
    out = {}
    for q in QUERIES:
        els = [json.loads(line) for line in (folder / "out" / f"{q}.jsonl").read_text().splitlines()]
        out[q] = Counter((e.pop("_ts"), e.pop("_op"), tuple(e.values())) for e in els
                         if e["_ts"] < FLUSH)
    return out


def produce(bootstrap: str, topic: str, rows: list[dict]) -> None:
    from kafka import KafkaProducer

    from tests.services.kafka import KAFKA_API_VERSION

    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION,
                             acks="all")
    for r in rows:
        producer.send(topic, json.dumps(r).encode(), partition=r["k"] % PARTITIONS)
    producer.flush()
    producer.close()


def test_backfill_then_the_worker_takes_over(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(PARTITIONS)
    sinks = {q: new_topic(1) for q in QUERIES}
    data = records()
    want = expected(tmp_path, data)
    produce(kafka_bootstrap, topic, data[:HISTORY])

    (tmp_path / "pipelines").mkdir()
    path = tmp_path / "pipelines" / "handover.yaml"
    opts = f"bootstrap_servers: '{kafka_bootstrap}'"
    path.write_text(pipeline_text(
        f"{{type: kafka, topic: {topic}, start: earliest, {opts}}}",
        {q: f"{{type: kafka, topic: {t}, {opts}}}" for q, t in sinks.items()},
    ))
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    with Catalog(url) as catalog:
        catalog.upgrade()
        archive_pipeline(load_pipeline(path), catalog, spark=session())  # beside the file
        boundary = catalog.archive_boundary("handover", "S")
    assert boundary is not None and boundary > 0
    session().stop()  # the backfill's own session starts without the Kafka jars

    for q in QUERIES:
        done = subprocess.run(
            [sys.executable, "-m", "cq_service.cli", "backfill", str(path), "--query", q,
             "--sink", "--handover", "--catalog", url, "--no-progress"],
            capture_output=True, text=True, timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"after {boundary}" in done.stdout, done.stdout

    worker = Worker(tmp_path, url, kafka_bootstrap, free_port())
    try:
        worker.start()
        produce(kafka_bootstrap, topic, data[HISTORY:])
        results = {q: Results(kafka_bootstrap, t) for q, t in sinks.items()}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            got = {q: r.before_flush() for q, r in results.items()}
            if all(got[q] == want[q] for q in QUERIES):
                break
            if any(got[q] - want[q] for q in QUERIES):  # an element not expected, or twice
                break
            time.sleep(0.5)
        for q in QUERIES:
            got = results[q].before_flush()
            assert got - want[q] == Counter(), (q, "unexpected or duplicated", got - want[q])
            assert want[q] - got == Counter(), (q, "missing", want[q] - got)
    finally:
        worker.stop()
