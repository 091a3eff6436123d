"""The worker image end to end (issue 27): a worker container reads a Kafka container's topic,
writes its results back to Kafka, keeps its catalog in a PostgreSQL container, answers
/healthz, and survives `docker kill` and a restart with nothing lost and nothing extra: every
output element is compared with the reference evaluator's. Where no Docker daemon can run, the
same test runs on the local services (tests/containers/stack.py says which)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import sqlalchemy as sa
from kafka import KafkaAdminClient

from tests.containers.stack import Stack
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
from tests.services.kafka import KAFKA_API_VERSION


def create_topics(bootstrap: str, partitions: dict[str, int]) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION, client_id="cq-e2e-admin"
    )
    try:
        admin.create_topics(
            {
                name: {"num_partitions": n, "replication_factor": 1}
                for name, n in partitions.items()
            },
            wait_for_metadata=True,
        )
        admin.wait_for_topics(list(partitions), timeout_ms=30_000)
    finally:
        admin.close()


def test_the_worker_survives_docker_kill_with_nothing_lost(
    tmp_path: Path, e2e_stack: Stack
) -> None:
    stack = e2e_stack
    assert stack.healthz() == 200
    run = uuid.uuid4().hex[:8]
    topic = f"e2e-{run}"
    sinks = {name: f"e2e-{run}-{name}" for name in QUERIES}
    create_topics(
        stack.bootstrap, {topic: PARTITIONS, f"{topic}.dlq": 1} | dict.fromkeys(sinks.values(), 1)
    )
    data = records(N, seed=27)
    expected = reference(tmp_path, data + flush_records(), QUERIES)
    results = {q: Results(stack.bootstrap, t) for q, t in sinks.items()}
    stack.deploy("e2e.yaml", pipeline_yaml(topic, sinks, QUERIES))

    produce(stack.bootstrap, topic, data[: N // 3])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not results["counts"].poll():
        time.sleep(0.2)
    assert results["counts"].poll(), "no results before the kill"
    produce(stack.bootstrap, topic, data[N // 3 : 2 * N // 3])
    time.sleep(0.5)
    stack.kill()  # mid-stream: some results delivered, some not, a checkpoint behind
    produce(stack.bootstrap, topic, data[2 * N // 3 :] + flush_records())
    stack.restart()
    assert stack.healthz() == 200
    wait_for(results, expected, seconds=180)

    for q in QUERIES:
        got = results[q].before_flush()
        missing = expected[q] - got
        assert not missing, (
            f"{q}: {sum(missing.values())} results missing, e.g. {list(missing)[:3]}"
        )
        # at-least-once across the kill: repeats of results are allowed, others are not
        assert set(got) == set(expected[q]), f"{q}: results that should not exist"
        assert sum(expected[q].values()) > 30, q
    stack.wait_healthy()  # Docker's own HEALTHCHECK of the image, after the restart
    # the catalog is the PostgreSQL one: the pipeline's queries and the worker's checkpoints
    engine = sa.create_engine(stack.catalog_url)
    try:
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT count(*) FROM queries")).scalar() >= len(
                QUERIES
            )
            assert connection.execute(sa.text("SELECT count(*) FROM checkpoints")).scalar() >= 1
    finally:
        engine.dispose()
