"""`cq serve` end to end on the real broker: records in, results out, compared with the
reference evaluator — undisturbed, across a SIGKILL and restart, and across a redeploy that
changes one query; malformed messages on the dead-letter topic and in /metrics."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition

from tests.integration.kafka_workload import (
    PARTITIONS,
    QUERIES,
    N,
    Results,
    flush_records,
    pipeline_yaml,
    produce,
    records,
    reference,
    wait_for,
)
from tests.integration.worker_process import Worker, free_port
from tests.services.kafka import KAFKA_API_VERSION

# End to end, SIGKILL and restart, per-query restart, dead letters: each with both client
# libraries (tests/integration/conftest.py).
pytestmark = pytest.mark.usefixtures("kafka_client")


@pytest.fixture
def setup(tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]) -> Iterator[tuple]:
    topic = new_topic(PARTITIONS)
    new_topic_dlq = new_topic(1)
    sinks = {name: new_topic(1) for name in QUERIES}
    (tmp_path / "pipelines").mkdir()
    worker = Worker(tmp_path, f"sqlite:///{tmp_path / 'catalog.db'}", kafka_bootstrap, free_port())
    try:
        yield topic, new_topic_dlq, sinks, worker
    finally:
        worker.stop()


def test_results_match_the_reference(tmp_path: Path, kafka_bootstrap: str, setup) -> None:
    topic, _, sinks, worker = setup
    (tmp_path / "pipelines" / "p.yaml").write_text(pipeline_yaml(topic, sinks, QUERIES))
    data = records(N)
    expected = reference(tmp_path, data + flush_records(), QUERIES)
    worker.start()
    produce(kafka_bootstrap, topic, data + flush_records())
    results = {q: Results(kafka_bootstrap, t) for q, t in sinks.items()}
    wait_for(results, expected)
    for q in QUERIES:
        assert results[q].before_flush() == expected[q], q  # exactly: no gap, no repeat
        assert sum(expected[q].values()) > 30, q


def test_sigkill_and_restart_lose_nothing(tmp_path: Path, kafka_bootstrap: str, setup) -> None:
    topic, _, sinks, worker = setup
    (tmp_path / "pipelines" / "p.yaml").write_text(pipeline_yaml(topic, sinks, QUERIES))
    data = records(N, seed=11)
    expected = reference(tmp_path, data + flush_records(), QUERIES)
    results = {q: Results(kafka_bootstrap, t) for q, t in sinks.items()}
    worker.start()
    produce(kafka_bootstrap, topic, data[: N // 3])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not results["counts"].poll():
        time.sleep(0.1)
    produce(kafka_bootstrap, topic, data[N // 3 : 2 * N // 3])
    time.sleep(0.5)
    worker.kill()  # mid-stream: some results delivered, some not, a checkpoint behind
    produce(kafka_bootstrap, topic, data[2 * N // 3 :] + flush_records())
    worker.start()
    wait_for(results, expected)
    for q in QUERIES:
        got = results[q].before_flush()
        missing = expected[q] - got
        assert not missing, f"{q}: {sum(missing.values())} results missing, e.g. {list(missing)[:3]}"
        assert set(got) == set(expected[q]), f"{q}: results that should not exist"


def test_editing_one_query_restarts_only_that_query(tmp_path: Path, kafka_bootstrap: str, setup) -> None:
    topic, _, sinks, worker = setup
    path = tmp_path / "pipelines" / "p.yaml"
    path.write_text(pipeline_yaml(topic, sinks, QUERIES))
    data = records(N, seed=5)
    expected = reference(tmp_path, data + flush_records(), QUERIES)
    results = {q: Results(kafka_bootstrap, t) for q, t in sinks.items()}
    worker.start()
    produce(kafka_bootstrap, topic, data[: N // 2])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not results["big"].poll():
        time.sleep(0.1)
    changed = {**QUERIES, "big": QUERIES["big"].replace("v > 80", "v > 90")}
    path.write_text(pipeline_yaml(topic, sinks, changed))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = json.loads(worker.get("/pipelines/kafka-e2e"))
        if "v > 90" in status["queries"]["big"]["cql"]:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the edit was not deployed")
    produce(kafka_bootstrap, topic, data[N // 2 :] + flush_records())
    wait_for(results, {q: expected[q] for q in ("counts", "every")})
    for q in ("counts", "every"):  # untouched: every result exactly once, no gap
        assert results[q].before_flush() == expected[q], q
    big = results["big"].before_flush()
    assert big != expected["big"]  # the new version's threshold took over …
    late = [e for e in big if e[0] > 10 * N // 2 + 1_000]
    assert late and all(e[2][1] > 90 for e in late)  # … for everything after the edit


def test_malformed_messages_go_to_the_dead_letter_topic(tmp_path: Path, kafka_bootstrap: str, setup) -> None:
    topic, _, sinks, worker = setup
    (tmp_path / "pipelines" / "p.yaml").write_text(pipeline_yaml(topic, sinks, QUERIES))
    worker.start()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, api_version=KAFKA_API_VERSION)
    bad = [b"{not json", b'{"k": "x", "v": 1, "ts": 5}', b"[1, 2]"]
    for value in bad:
        producer.send(topic, value, partition=0)
    producer.send(topic, json.dumps({"k": 0, "v": 1, "ts": 7}).encode(), partition=0)
    producer.flush()
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap, api_version=KAFKA_API_VERSION,
        auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=500,
    )
    consumer.assign([TopicPartition(f"{topic}.dlq", 0)])
    dead: list = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(dead) < len(bad):
        dead.extend(consumer)
    assert sorted(m.value for m in dead) == sorted(bad)
    for m in dead:
        headers = dict(m.headers)
        assert any(k.endswith("reason") for k in headers), headers
    metrics = worker.get("/metrics")
    line = next(ln for ln in metrics.splitlines() if ln.startswith("cq_source_malformed_total{"))
    assert float(line.rsplit(" ", 1)[1]) == len(bad)


def test_sys_stream_over_kafka_and_the_api(tmp_path: Path, kafka_bootstrap: str, setup) -> None:
    """A SysStream query's results reach its Kafka topic and the results API; the source's
    statistics count exactly what was produced (elements and malformed messages)."""
    topic, _, sinks, worker = setup
    monitor = "SELECT * FROM SysStream WHERE kind = 'source'"
    queries = {"every": QUERIES["every"], "counts": monitor}  # `counts`' topic carries it
    text = pipeline_yaml(topic, sinks, queries)
    text = text.replace("queries:\n", "resources: {statistics_interval: 100}\nqueries:\n")
    (tmp_path / "pipelines" / "p.yaml").write_text(text)
    worker.start()
    events: list[str] = []
    import threading

    subscribed = threading.Event()

    def listen() -> None:  # the results API, as server-sent events
        url = f"http://127.0.0.1:{worker.port}/queries/kafka-e2e/counts/results"
        with urllib.request.urlopen(url, timeout=30) as r:
            subscribed.set()  # the endpoint subscribes before it answers
            for raw in r:
                line = raw.decode().strip()
                if line.startswith("data: "):
                    events.append(line[6:])
                    if len(events) >= 2:  # a boundary: the rows of S and of SysStream
                        return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert subscribed.wait(30), "the results API did not answer"
    data = records(N)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, api_version=KAFKA_API_VERSION)
    producer.send(topic, b"{not json", partition=0)
    producer.flush()
    produce(kafka_bootstrap, topic, data + flush_records())
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap, api_version=KAFKA_API_VERSION,
        auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=300,
    )
    consumer.assign([TopicPartition(sinks["counts"], 0)])
    seen: list[dict] = []
    deadline = time.monotonic() + 90
    done = False
    while time.monotonic() < deadline and not done:
        seen.extend(json.loads(m.value) for m in consumer)
        source = [r for r in seen if r["entity"] == "S"]
        done = any(r["rows_in"] == N + PARTITIONS for r in source)
    assert done, f"the source's statistics never counted every element: {seen[-3:]}"
    last = max((r for r in seen if r["entity"] == "S"), key=lambda r: r["rows_in"])
    assert last["dead_lettered"] == 1 and last["kind"] == "source" and last["pipeline"] == ""
    assert all(r["_ts"] % 100 == 0 for r in seen)
    listener.join(30)
    assert len(events) >= 2 and all(json.loads(e)["kind"] == "source" for e in events)
