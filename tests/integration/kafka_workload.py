"""The workload of the `cq serve` tests on the real broker: keyed records over three
partitions, a pipeline of three queries reading them from Kafka and writing each to a sink topic,
the reference evaluator's results for it, and a reader of what a sink topic holds (`Results`).

Shared by tests/integration/test_worker_kafka.py, test_worker_deploys.py, test_worker_outages.py,
test_backfill_handover.py and tests/containers/test_end_to_end.py.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition

from tests.reference import evaluate_pipeline
from tests.services.kafka import KAFKA_API_VERSION

PARTITIONS = 3
N = 600  # records per test: the reference evaluator is brute force (about 15 s for these)
FLUSH = 10 * N + 300  # a last record per partition this late completes every earlier instant
QUERIES = {
    "counts": "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM S [Range 100 Slide 50] GROUP BY k",
    "big": "SELECT Istream(k, v) FROM S [Range 50] WHERE v > 80",
    "every": "SELECT * FROM S WHERE v > 50",
}


def records(n: int, seed: int = 7) -> list[dict]:
    """Keyed records; partition k % 3 receives its records in timestamp order."""
    rnd = random.Random(seed)
    return [{"k": i % 6, "v": rnd.randrange(100), "ts": 10 * i + rnd.randrange(10)} for i in range(n)]


def flush_records() -> list[dict]:
    return [{"k": 100 + p, "v": 0, "ts": FLUSH} for p in range(PARTITIONS)]


def pipeline_yaml(topic: str, sinks: dict[str, str], queries: dict[str, str]) -> str:
    lines = [
        "version: 1",
        "name: kafka-e2e",
        "time_unit: ms",
        "streams:",
        "  S:",
        "    schema: {k: int, v: int, ts: int}",
        "    timestamp: ts",
        f"    source: {{type: kafka, topic: {topic}, start: earliest, dead_letter_topic: {topic}.dlq}}",
        "queries:",
    ]
    for name, cql in queries.items():
        lines += [f"  {name}:", f"    cql: {json.dumps(cql)}", f"    sink: {{type: kafka, topic: {sinks[name]}}}"]
    return "\n".join(lines) + "\n"


def reference(tmp_path: Path, data: list[dict], queries: dict[str, str]) -> dict[str, Counter]:
    """The reference evaluator's results, before the flush instant."""
    folder = tmp_path / "reference"
    folder.mkdir(exist_ok=True)
    (folder / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    text = [
        "version: 1", "name: ref", "time_unit: ms", "streams:", "  S:",
        "    schema: {k: int, v: int, ts: int}", "    timestamp: ts",
        "    source: {type: file, path: s.jsonl}", "queries:",
    ]
    for name, cql in queries.items():
        text += [f"  {name}:", f"    cql: {json.dumps(cql)}", f"    sink: {{type: file, path: out/{name}.jsonl}}"]
    (folder / "pipeline.yaml").write_text("\n".join(text) + "\n")
    out = evaluate_pipeline(folder / "pipeline.yaml")
    return {
        name: Counter((ts, op, tuple(row)) for ts, op, row in elements if ts < FLUSH)
        for name, elements in out.items()
    }


def produce(bootstrap: str, topic: str, data: list[dict]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION, acks="all")
    for r in data:
        partition = r["k"] % PARTITIONS
        producer.send(topic, json.dumps(r).encode(), key=str(r["k"]).encode(), partition=partition)
    producer.flush()
    producer.close()


class Results:
    """Everything on a sink topic so far, as (ts, op, row) elements."""

    def __init__(self, bootstrap: str, topic: str):
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION,
            auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=200,
        )
        self.consumer.assign([TopicPartition(topic, 0)])
        self.elements: list[tuple] = []

    def poll(self) -> list[tuple]:
        for message in self.consumer:
            obj = json.loads(message.value)
            ts, op = obj.pop("_ts"), obj.pop("_op")
            self.elements.append((ts, op, tuple(obj.values())))
        return self.elements

    def before_flush(self) -> Counter:
        return Counter(e for e in self.poll() if e[0] < FLUSH)


def wait_for(results: dict[str, Results], expected: dict[str, Counter], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(set(results[q].before_flush()) >= set(expected[q]) for q in expected):
            return
        time.sleep(0.3)
