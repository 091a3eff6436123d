"""`cq serve` with a runner-spark pipeline (service/spark_jobs.py), on local Spark and the real
broker: the worker runs it as a Spark Structured Streaming job, not on the engine, and its sink
holds what the embedded engine gives up to the instant the job says is final; a file with a
query Spark cannot run is rejected with its line and column; removing the file stops the job."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from pathlib import Path

from kafka import KafkaProducer

from cq_service.catalog import Catalog
from cq_service.compiler import compile_pipeline
from cq_service.io.kafka import API_VERSION
from cq_service.runner import run_pipeline
from cq_service.service.config import ServiceConfig
from cq_service.service.worker import Worker
from cq_service.spec import load_pipeline_text

PIPELINE = """\
version: 1
name: spark-served
time_unit: ms
resources: {{runner: spark}}
streams:
  S:
    schema: {{k: int, v: int, ts: int}}
    timestamp: ts
    source: {{type: kafka, topic: {topic}, bootstrap_servers: '{bootstrap}'}}
queries:
  counts:
    cql: SELECT k, COUNT(*) AS n, SUM(v) AS total FROM S [Range 100] GROUP BY k
    sink: {{type: file, path: {out}}}
"""

# A query Spark cannot run: it reads a stream from a file, not from Kafka.
FROM_FILE = "  from_file:\n    cql: SELECT Istream(a) FROM F [Range 100]\n" \
            "    sink: {type: file, path: f_out.jsonl}\n"
FILE_STREAM = "  F:\n    schema: {a: int}\n    source: {type: file, path: f.jsonl}\nqueries:\n"


def produce(bootstrap: str, topic: str, n: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=API_VERSION, acks="all")
    for i in range(n):
        producer.send(topic, json.dumps({"k": i % 4, "v": i, "ts": 7 * i}).encode())
    producer.flush()
    producer.close()


def bags(lines: list[str]) -> Counter:
    return Counter(lines)


def test_the_worker_runs_a_runner_spark_pipeline_on_spark(
    kafka_bootstrap, new_topic, tmp_path: Path
) -> None:
    topic = new_topic()
    produce(kafka_bootstrap, topic, 200)
    folder = tmp_path / "pipelines"
    folder.mkdir()
    out = tmp_path / "counts.jsonl"
    text = PIPELINE.format(topic=topic, bootstrap=kafka_bootstrap, out=out)
    (folder / "p.yaml").write_text(text)
    catalog = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    catalog.upgrade()
    config = ServiceConfig(pipelines=str(folder), catalog=catalog.url, port=0,
                           reconcile_interval=0.5, manage_interval=0,
                           spark_checkpoints=str(tmp_path / "spark"), spark_trigger="1 second")
    worker = Worker(config, catalog)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 240
        status = None
        while time.monotonic() < deadline:
            status = worker.spark_jobs.status("spark-served")
            if status and status["error"] is None and status["final_up_to"].get("counts"):
                break
            time.sleep(1)
        assert status is not None and status["error"] is None, status
        final = status["final_up_to"]["counts"]
        assert final == 7 * 199 - 1  # the heartbeat: latest - max_delay (0) - 1
        assert not worker.queries  # nothing on the embedded engine
        assert {q.name: q.status for q in catalog.queries("spark-served")} == {"counts": "running"}

        # The embedded engine over the same topic, up to the instant the job calls final.
        embedded = load_pipeline_text(text.replace("runner: spark", "runner: embedded")
                                      .replace(str(out), str(tmp_path / "emb.jsonl")),
                                      tmp_path / "emb.yaml")
        run_pipeline(compile_pipeline(embedded))
        expected = [x for x in (tmp_path / "emb.jsonl").read_text().splitlines()
                    if json.loads(x)["_ts"] <= final]
        assert expected
        assert bags(out.read_text().splitlines()) == bags(expected)

        # A query Spark cannot run: the new version is rejected, the old job keeps running.
        (folder / "f.jsonl").write_text('{"a": 1}\n')
        (folder / "p.yaml").write_text((text + FROM_FILE).replace("queries:\n", FILE_STREAM, 1))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not worker.errors:
            time.sleep(0.2)
        [errors] = worker.errors.values()
        assert any(re.match(r".*p\.yaml:18:\d+: from_file: .*stream F is read from file", e)
                   for e in errors), errors
        assert worker.spark_jobs.running("spark-served")

        # The file removed: the job stops, its query is stopped in the catalog.
        (folder / "p.yaml").unlink()
        # The reconciler stops the job, then writes the catalog: wait for both.
        def statuses() -> dict[str, str]:
            return {q.name: q.status for q in catalog.queries("spark-served")}

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (worker.spark_jobs.running("spark-served")
                                               or statuses() != {"counts": "stopped"}):
            time.sleep(0.2)
        assert not worker.spark_jobs.running("spark-served")
        assert statuses() == {"counts": "stopped"}
    finally:
        worker.stop()
        thread.join(120)
        catalog.close()
