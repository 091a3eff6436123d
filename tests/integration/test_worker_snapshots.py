"""A restart from a state snapshot reads nothing it had read before.

Three queries whose state reaches back over the whole history — a `[Rows N]` window, an
unbounded aggregate, a join with a relation read from Kafka — run under `cq serve` on the real
broker. Once every record is consumed and a snapshot taken, the worker is killed (SIGKILL) and
started again: with snapshots it reads not one record again (`cq_source_elements_total` of
the new process is 0), where without them it replays every record of both topics; records
produced after the restart then complete the run, and every sink topic equals `cq run` over
all the records, with only the duplicates docs/service.md allows.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer

from tests.integration.restarts import (
    ENGINE_SEED,
    FLUSH,
    Lives,
    check_done,
    check_sink,
    end_offsets,
    initial_r,
    kafka_pipeline,
    r_updates,
    read_topic,
    record_death,
    reference,
    s_record,
)
from tests.integration.worker_process import free_port
from tests.services.kafka import KAFKA_API_VERSION

QUERIES = {
    "rows": "SELECT k, SUM(v) AS total FROM S [Rows 100] GROUP BY k",
    "unbounded": "SELECT k, COUNT(*) AS n, MAX(v) AS top FROM S GROUP BY k",
    "join": "SELECT Istream(S.k, S.v, R.label) FROM S [Range 50], R WHERE S.k = R.k",
}
BEFORE, AFTER = 3000, 1000  # S records before and after the restart


def records(start: int, n: int, rnd: random.Random) -> tuple[list[dict], list[dict]]:
    s, r = [], []
    for i in range(start, start + n):
        s.append(s_record(i, rnd))
        if i % 10 == 0 and i > 0:
            r.extend(r_updates(i, s[-1]["ts"]))
    return s, r


def produce(bootstrap: str, s_topic: str, r_topic: str, s: list[dict], r: list[dict]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION,
                             acks="all")
    for topic, rows in ((s_topic, s), (r_topic, r)):
        for row in rows:
            producer.send(topic, json.dumps(row).encode(), partition=0)
    producer.flush()
    producer.close()


def source_counts(lives: Lives) -> dict[str, float]:
    """`cq_source_elements_total` of each source (by stream name) in the running process."""
    return {name.split('source="')[1].split("@")[0]: v for name, v in lives.metrics().items()
            if name.startswith("cq_source_elements_total{")}


def caught_up(lives: Lives) -> bool:
    """Nothing behind in the topics, and nothing waiting in the engine (the API answers while
    the engine works through what it has read)."""
    metrics = lives.metrics()
    lags = [v for name, v in metrics.items() if name.startswith("cq_source_lag{")]
    return bool(lags) and not any(lags) and metrics.get("cq_queued_rows") == 0


@pytest.mark.parametrize("snapshots", [True, False], ids=["snapshots", "replay"])
def test_a_restart_reads_only_after_the_snapshot(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: KafkaAdminClient,
    new_topic: Callable[..., str], snapshots: bool,
) -> None:
    s_topic, r_topic = new_topic(1), new_topic(1)
    sinks = {q: new_topic(1) for q in QUERIES}
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "p.yaml").write_text(
        kafka_pipeline(s_topic, r_topic, sinks, QUERIES)
    )
    rnd = random.Random(ENGINE_SEED)
    s1, r1 = records(0, BEFORE, rnd)
    r1 = initial_r() + r1
    produce(kafka_bootstrap, s_topic, r_topic, s1, r1)
    lives = Lives(tmp_path, f"sqlite:///{tmp_path / 'catalog.db'}", kafka_bootstrap, free_port())
    interval = 0.3 if snapshots else 0.0
    try:
        lives.start(snapshot_interval=interval)
        assert lives.ready()
        deadline = time.monotonic() + 120
        while not caught_up(lives):
            assert time.monotonic() < deadline, lives.tail()
            time.sleep(0.2)
        assert source_counts(lives) == {"S": len(s1), "R": len(r1)}
        time.sleep(1.0)  # a snapshot (and a checkpoint) after the last record
        lives.kill()
        deaths = [record_death(1, "outside", lives, kafka_admin, sinks, QUERIES)]
        lives.start(snapshot_interval=interval)
        assert lives.ready()
        time.sleep(1.0)
        read_again = source_counts(lives)
        if snapshots:
            assert read_again == {"S": 0, "R": 0}, read_again  # nothing read twice
            assert lives.metrics()["cq_snapshot_restored"] > 0
        else:
            assert read_again == {"S": len(s1), "R": len(r1)}  # the whole history again
        s2, r2 = records(BEFORE, AFTER, rnd)
        s2.append({"k": 0, "v": 0, "ts": FLUSH})
        r2.append({"k": 99, "label": "end", "ts": FLUSH, "_op": "+"})
        produce(kafka_bootstrap, s_topic, r_topic, s2, r2)
        expected = reference(tmp_path / "reference", s1 + s2, r1 + r2, QUERIES)
        deadline = time.monotonic() + 120
        while True:
            ends = end_offsets(kafka_admin, sinks)
            got = {q: read_topic(kafka_bootstrap, sinks[q], ends[q]) for q in QUERIES}
            if all(check_done(got[q], expected[q]) for q in QUERIES):
                break
            assert time.monotonic() < deadline, lives.tail()
            time.sleep(0.5)
    finally:
        lives.stop()
    for q in QUERIES:
        assert len(expected[q]) > 100, q
        check_sink(q, got[q], expected[q], deaths)
