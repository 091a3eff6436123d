"""`cq serve` while the broker or the catalog database goes away and comes back, mid-stream.

Each test runs the worker as a process reading and writing Kafka, with records produced before,
during and after the outage, and stops and starts a dependency of its own (tests/services/own.py;
the shared broker and database are never stopped). The worker stays up, `/readyz` answers 503
with the reason meanwhile, and afterwards every sink topic holds the reference output (`cq run`
over the same records from a file).

Duplicates allowed (docs/service.md, "When Kafka or the catalog is away"): an outage, without a
restart of the worker, repeats nothing — except that a message the broker wrote but whose
acknowledgement was lost in the outage is sent again, and every such result has a timestamp
after the frontier of the last checkpoint written before the outage. The tests check that every
result is there, that nothing else is, and that any repeated result lies after that frontier.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from cq_service.catalog import Catalog
from cq_service.compiler import load_and_compile
from cq_service.runner import run_pipeline
from tests.integration.kafka_workload import (
    FLUSH,
    PARTITIONS,
    QUERIES,
    N,
    Results,
    flush_records,
    pipeline_yaml,
    records,
)
from tests.integration.worker_process import Worker, free_port
from tests.services.kafka import KAFKA_API_VERSION
from tests.services.own import OwnKafka, OwnPostgres

FEED_S = 6.0  # the records are produced over this long, the outage in the middle of it
RETRIES = {  # the worker retries every 0.2-1 s, so it resumes soon after the dependency
    "CQ_RETRY_BACKOFF": "0.2", "CQ_RETRY_BACKOFF_MAX": "1.0", "CQ_FLUSH_TIMEOUT": "1.0",
}


class Feeder(threading.Thread):
    """Produces `data` to `topic` evenly over `seconds` (partition k % 3); while the broker is
    away, its producer keeps the records and delivers them once it is back."""

    def __init__(self, bootstrap: str, topic: str, data: list[dict], seconds: float = FEED_S):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.data, self.seconds = bootstrap, topic, data, seconds
        self.sent = 0

    def run(self) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, api_version=KAFKA_API_VERSION, acks="all",
            reconnect_backoff_max_ms=1000,
        )
        start = time.monotonic()
        for i, r in enumerate(self.data):
            time.sleep(max(0.0, start + self.seconds * i / len(self.data) - time.monotonic()))
            producer.send(self.topic, json.dumps(r).encode(), key=str(r["k"]).encode(),
                          partition=r["k"] % PARTITIONS)
            self.sent = i + 1
        producer.flush()
        producer.close()


def cq_run_reference(folder: Path, data: list[dict]) -> dict[str, Counter]:
    """`cq run` of the queries over `data` from a jsonl file: their results before FLUSH."""
    folder.mkdir()
    (folder / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    text = [
        "version: 1", "name: ref", "time_unit: ms", "streams:", "  S:",
        "    schema: {k: int, v: int, ts: int}", "    timestamp: ts",
        "    source: {type: file, path: s.jsonl}", "queries:",
    ]
    for name, cql in QUERIES.items():
        text += [f"  {name}:", f"    cql: {json.dumps(cql)}",
                 f"    sink: {{type: file, path: out/{name}.jsonl}}"]
    (folder / "pipeline.yaml").write_text("\n".join(text) + "\n")
    run_pipeline(load_and_compile(folder / "pipeline.yaml"))
    out = {}
    for name in QUERIES:
        elements = Counter()
        for line in (folder / "out" / f"{name}.jsonl").read_text().splitlines():
            obj = json.loads(line)
            ts, op = obj.pop("_ts"), obj.pop("_op")
            if ts < FLUSH:
                elements[(ts, op, tuple(obj.values()))] += 1
        out[name] = elements
    return out


def http(port: int, path: str, body: dict | None = None) -> tuple[int, dict | str, float]:
    """(status, JSON body or text, seconds taken) of a request to the worker's API."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, method="GET" if body is None else "POST",
        headers={"Authorization": "Bearer t", "Content-Type": "application/json"},
    )
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text), time.monotonic() - start
    except ValueError:
        return status, text, time.monotonic() - start


def until(
    condition: Callable[[], object],
    seconds: float,
    what: str,
    show: Callable[[], object] | None = None,
) -> object:
    """Poll `condition` until it returns something true; that value. On a timeout the message
    ends with what `show` returns then (e.g. the last /readyz answer)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    last = "" if show is None else f"; last: {show()!r}"
    raise AssertionError(f"not within {seconds:g} s: {what}{last}")


def readiness(worker: Worker) -> tuple[int, dict]:
    status, body, _ = http(worker.port, "/readyz")
    assert isinstance(body, dict)
    return status, body


def frontiers(catalog_url: str) -> dict[str, int]:
    """Each query's frontier in the worker's last checkpoint."""
    with Catalog(catalog_url) as catalog:
        saved = catalog.load_checkpoint("e2e")
    return {k: int(q["frontier"]) for k, q in (saved.queries if saved else {}).items()}


def metric(worker: Worker, name: str, dependency: str, default: float | None = None) -> float:
    """The metric's value for `dependency`; `default` if it has none yet (None: an error)."""
    text = http(worker.port, "/metrics")[1]
    assert isinstance(text, str)
    line = next((ln for ln in text.splitlines()
                 if ln.startswith(f'{name}{{dependency="{dependency}"}}')), None)
    if line is None and default is not None:
        return default
    assert line is not None, f"no {name} for {dependency}"
    return float(line.rsplit(" ", 1)[1])


def check_results(
    results: dict[str, Results], expected: dict[str, Counter], before: dict[str, int]
) -> None:
    """Every expected result is on its topic, nothing else is, and a result is repeated only
    if it lies after the query's frontier `before` the outage."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(set(results[q].before_flush()) >= set(expected[q]) for q in expected):
            break
        time.sleep(0.3)
    for q in expected:
        got = results[q].before_flush()
        missing = expected[q] - got
        assert not missing, f"{q}: {sum(missing.values())} results missing, e.g. {list(missing)[:3]}"
        assert set(got) == set(expected[q]), f"{q}: results that should not exist"
        repeated = got - expected[q]
        frontier = before[f"kafka-e2e/{q}"]
        assert all(ts > frontier for ts, _, _ in repeated), (q, frontier, repeated)
        assert sum(expected[q].values()) > 30, q


def create_topics(bootstrap: str, names: dict[str, int]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION)
    try:
        admin.create_topics([NewTopic(n, p, 1) for n, p in names.items()])
    finally:
        admin.close()


def test_the_worker_rides_out_a_broker_restart(tmp_path: Path, own_kafka: OwnKafka) -> None:
    bootstrap = own_kafka.bootstrap
    sinks = {name: f"out-{name}" for name in QUERIES}
    create_topics(bootstrap, {"in": PARTITIONS, "in.dlq": 1, **{t: 1 for t in sinks.values()}})
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "p.yaml").write_text(pipeline_yaml("in", sinks, QUERIES))
    data = records(N, seed=13)
    expected = cq_run_reference(tmp_path / "reference", data + flush_records())
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    worker = Worker(tmp_path, catalog, bootstrap, free_port())
    worker.env.update(RETRIES)
    try:
        worker.start()
        feeder = Feeder(bootstrap, "in", data)
        feeder.start()
        until(lambda: feeder.sent > N // 3 and frontiers(catalog).get("kafka-e2e/every", -1) > 0,
              30, "results and a checkpoint before the outage")
        before = frontiers(catalog)
        # A broker started just before the worker may still be loading its group coordinator
        # when the worker first asks for committed offsets (librdkafka: NOT_COORDINATOR, a
        # retriable error): that can count as an outage of its own before this test's one.
        outages = metric(worker, "cq_dependency_outages_total", f"kafka {bootstrap}", default=0)

        own_kafka.stop()  # mid-stream: records keep coming, kept by the feeder's producer
        # Not ready at the first failed call; the reason is the probe's once it finds the port
        # closed (a call failing while the broker shuts down may name something else first,
        # e.g. librdkafka's "Unknown partition"). 60 s: a guard against a hang, not a bound on
        # speed (15 s was missed once on a loaded 2-core machine).
        _, body = until(lambda: (r := readiness(worker))[0] == 503 and any(
            reason.startswith(f"kafka {bootstrap}: ") and "connection refused" in reason
            for reason in r[1]["reasons"]) and r, 60, "/readyz says not ready: connection refused",
            show=lambda: readiness(worker))
        assert body["status"] == "not ready"
        assert http(worker.port, "/healthz")[0] == 200
        assert metric(worker, "cq_dependency_up", f"kafka {bootstrap}") == 0
        time.sleep(2)  # checkpoints are tried and postponed meanwhile
        assert readiness(worker)[0] == 503
        assert worker.proc is not None and worker.proc.poll() is None  # the worker is up

        own_kafka.start()
        until(lambda: readiness(worker)[0] == 200, 120, "/readyz ready again",
              show=lambda: readiness(worker))
        feeder.join(60)
        Feeder(bootstrap, "in", flush_records(), seconds=0).run()
        check_results({q: Results(bootstrap, t) for q, t in sinks.items()}, expected, before)
        assert worker.proc.poll() is None
        assert metric(worker, "cq_dependency_up", f"kafka {bootstrap}") == 1
        assert metric(worker, "cq_dependency_outages_total", f"kafka {bootstrap}") == outages + 1
        assert frontiers(catalog)["kafka-e2e/every"] > before["kafka-e2e/every"]  # checkpoints go on
    finally:
        worker.stop()


def test_the_worker_rides_out_a_catalog_restart(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str], own_postgres: OwnPostgres
) -> None:
    topic = new_topic(PARTITIONS)
    sinks = {name: new_topic(1) for name in QUERIES}
    (tmp_path / "pipelines").mkdir()
    path = tmp_path / "pipelines" / "p.yaml"
    path.write_text(pipeline_yaml(topic, sinks, QUERIES))
    data = records(N, seed=17)
    expected = cq_run_reference(tmp_path / "reference", data + flush_records())
    catalog = own_postgres.url
    shown = f"catalog postgresql+psycopg://cq:***@127.0.0.1:{own_postgres.port}/cq"
    worker = Worker(tmp_path, catalog, kafka_bootstrap, free_port())
    worker.env.update(RETRIES)
    try:
        worker.start()
        feeder = Feeder(kafka_bootstrap, topic, data)
        feeder.start()
        until(lambda: feeder.sent > N // 3 and frontiers(catalog).get("kafka-e2e/every", -1) > 0,
              30, "results and a checkpoint before the outage")
        before = frontiers(catalog)
        every = Results(kafka_bootstrap, sinks["every"])

        own_postgres.stop()
        _, body = until(lambda: (r := readiness(worker))[0] == 503 and r, 60,
                        "/readyz says not ready", show=lambda: readiness(worker))
        assert body["status"] == "not ready"
        assert any(reason.startswith(f"{shown}: ") for reason in body["reasons"]), body
        status, answer, seconds = http(worker.port, "/pipelines")  # needs the catalog
        assert status == 503 and answer["detail"].startswith(shown), answer
        assert seconds < 10  # an answer, not a hang (the API's own timeout is 30 s)
        status, answer, _ = http(worker.port, "/pipelines", {"yaml": path.read_text()})
        assert status == 503, answer  # a deployment that cannot be recorded is not made
        # A change of the file waits for the catalog: made once it is back.
        extra = new_topic(1)
        path.write_text(pipeline_yaml(topic, {**sinks, "extra": extra},
                                      {**QUERIES, "extra": "SELECT * FROM S WHERE v < 5"}))
        seen = len(every.poll())
        until(lambda: len(every.poll()) > seen, 30, "results while the catalog is away")
        assert http(worker.port, "/healthz")[0] == 200
        assert readiness(worker)[0] == 503
        assert worker.proc is not None and worker.proc.poll() is None

        own_postgres.start()
        until(lambda: readiness(worker)[0] == 200, 120, "/readyz ready again",
              show=lambda: readiness(worker))
        until(lambda: http(worker.port, "/pipelines")[0] == 200, 30, "GET /pipelines answers")
        until(lambda: http(worker.port, "/queries/kafka-e2e/extra")[1].get("running"), 30,
              "the waiting change deployed")
        until(lambda: frontiers(catalog)["kafka-e2e/every"] > before["kafka-e2e/every"], 30,
              "a checkpoint written again")
        feeder.join(60)
        Feeder(kafka_bootstrap, topic, flush_records(), seconds=0).run()
        check_results({q: Results(kafka_bootstrap, sinks[q]) for q in QUERIES}, expected, before)
        assert worker.proc.poll() is None
        assert metric(worker, "cq_dependency_outages_total", shown) == 1
        assert metric(worker, "cq_dependency_retries_total", shown) >= 1
    finally:
        worker.stop()
