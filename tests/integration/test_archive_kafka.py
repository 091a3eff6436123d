"""`cq archive` of a real Kafka topic with two partitions, through Spark's Kafka connector
(local Spark): the archive holds what the engine's KafkaReader gives, offsets are committed
per partition, runs append only what is new, a crash before the commit duplicates nothing,
malformed messages are dead-lettered and counted, and the completeness boundary is the
minimum over the partitions of their largest _ts minus max_delay."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kafka import KafkaProducer

from cq_service.batch.archive import archive_pipeline, dead_letter_dir
from cq_service.batch.cli import describe
from cq_service.batch.layout import (
    ARCHIVE_COLUMNS,
    archive_boundary,
    archive_root,
    archive_schema,
    read_stream,
)
from cq_service.catalog import Catalog
from cq_service.io.kafka import API_VERSION, KafkaReader
from cq_service.spec import load_pipeline

HOUR = 3_600_000


@pytest.fixture(scope="module")
def spark():
    """A local SparkSession with the Kafka connector's jars (left running for later tests)."""
    from cq_service.batch.spark import session

    return session(master="local[2]", app_name="cq-archive-tests", kafka=True)


@pytest.fixture
def catalog(tmp_path: Path):
    c = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    c.upgrade()
    yield c
    c.close()


def produce(bootstrap: str, topic: str, messages: list[tuple[int, bytes | None]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=API_VERSION, acks="all")
    try:
        for partition, value in messages:
            key = b"k" if value is None else None  # a tombstone needs a key
            producer.send(topic, value=value, key=key, partition=partition)
        producer.flush()
    finally:
        producer.close()


def event(i: int, ts: int) -> bytes:
    return json.dumps({"id": i, "city": f"c{i % 3}", "amount": i / 2, "ts": ts}).encode()


def write_pipeline(tmp_path: Path, topic: str, bootstrap: str, timestamp: bool = True) -> Path:
    path = tmp_path / "p.yaml"
    stamp = "    timestamp: ts\n    max_delay: 10 seconds\n" if timestamp else ""
    path.write_text(
        "version: 1\nname: kafka-archive\ntime_unit: ms\nstreams:\n  Sales:\n"
        "    schema: {id: int, city: string, amount: float}\n" + stamp
        + f"    source: {{type: kafka, topic: {topic}, bootstrap_servers: '{bootstrap}'}}\n"
    )
    return path


def engine_view(spec, stream) -> pa.Table:
    """What the engine's KafkaReader reads from the topic now, as archived columns."""
    schema = archive_schema(stream)
    tables = []
    with KafkaReader(stream, spec.time_unit) as reader:
        for chunk in reader:
            arrays = [*chunk.columns, pa.array(chunk.ts), pa.array(chunk.partition),
                      pa.array(chunk.record)]
            tables.append(pa.Table.from_arrays(arrays, schema=schema))
    return pa.concat_tables(tables).sort_by([(c, "ascending") for c in ARCHIVE_COLUMNS])


FIRST = [
    (0, event(1, 1_000)),
    (1, event(2, 2_000)),
    (0, event(3, HOUR + 5)),
    (1, b"not json"),
    (1, event(5, 2 * HOUR)),
    (0, json.dumps({"id": "six", "ts": 7}).encode()),
    (0, None),  # a tombstone
    (1, event(8, 2 * HOUR + 1)),
]


def test_archive_of_a_two_partition_topic(
    spark, kafka_bootstrap, new_topic, tmp_path: Path, catalog: Catalog
):
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, FIRST)
    spec = load_pipeline(write_pipeline(tmp_path, topic, kafka_bootstrap))
    stream = spec.streams["Sales"]
    root = archive_root(spec)

    first = archive_pipeline(spec, catalog, spark=spark).streams[0]
    archived = read_stream(root, stream, "ms")
    assert archived.to_pylist() == engine_view(spec, stream).to_pylist()
    assert archived.column("id").to_pylist() == [1, 2, 3, 5, 8]
    assert archived.column("_partition").to_pylist() == [0, 1, 0, 1, 1]
    assert archived.column("_offset").to_pylist() == [0, 0, 1, 2, 3]
    assert (first.rows, first.dead_letters, first.run) == (5, 3, 1)
    assert first.offsets == {0: (0, 4), 1: (0, 4)}
    assert "offsets 0:0..4, 1:0..4" in describe(first)
    hours = sorted(str(p.parent.relative_to(root / "Sales")) for p in
                   (root / "Sales").rglob("*.parquet"))
    assert hours == ["date=1970-01-01/hour=00", "date=1970-01-01/hour=01",
                     "date=1970-01-01/hour=02"]
    # dead letters: where and why
    letters = pq.read_table(dead_letter_dir(root, "Sales")).to_pylist()
    assert [(d["_partition"], d["_offset"]) for d in letters] == [(0, 2), (0, 3), (1, 1)]
    assert letters[2]["raw"] == "not json" and letters[2]["file"] == f"kafka:{topic}/1"
    assert "no value" in letters[1]["reason"] and "'id'" in letters[0]["reason"]
    # committed offsets and the boundary: min(HOUR + 5, 2 HOUR + 1) - 10 s
    state = catalog.archive_state("kafka-archive", "Sales")
    assert state.offsets == {0: 4, 1: 4}
    assert state.max_ts == {0: HOUR + 5, 1: 2 * HOUR + 1}
    assert archive_boundary(catalog, "kafka-archive", "Sales") == HOUR + 5 - 10_000

    # nothing new: nothing written
    files = sorted(root.rglob("*.parquet"))
    again = archive_pipeline(spec, catalog, spark=spark).streams[0]
    assert again.run is None and not again.wrote
    assert sorted(root.rglob("*.parquet")) == files

    # more messages: only those are archived
    produce(kafka_bootstrap, topic, [(0, event(9, 3 * HOUR)), (1, event(10, 3 * HOUR + 1))])
    third = archive_pipeline(spec, catalog, spark=spark).streams[0]
    assert (third.rows, third.dead_letters, third.run) == (2, 0, 2)
    assert third.offsets == {0: (4, 5), 1: (4, 5)}
    archived = read_stream(root, stream, "ms")
    assert archived.to_pylist() == engine_view(spec, stream).to_pylist()
    assert archived.num_rows == 7
    assert catalog.archive_boundary("kafka-archive", "Sales") == 3 * HOUR - 10_000
    # replay bounds are inclusive
    assert read_stream(root, stream, "ms", HOUR + 5, 2 * HOUR + 1).column("id").to_pylist() == [
        3, 5, 8
    ]


def test_a_crash_before_the_commit_duplicates_nothing(
    spark, kafka_bootstrap, new_topic, tmp_path: Path, catalog: Catalog,
    monkeypatch: pytest.MonkeyPatch,
):
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, [(i % 2, event(i, 1_000 * i)) for i in range(10)])
    spec = load_pipeline(write_pipeline(tmp_path, topic, kafka_bootstrap))
    stream = spec.streams["Sales"]
    archive_pipeline(spec, catalog, spark=spark)
    produce(kafka_bootstrap, topic, [(i % 2, event(i, 1_000 * i)) for i in range(10, 16)])

    def crash(state):
        raise RuntimeError("killed between the files and the offsets")

    monkeypatch.setattr(catalog, "save_archive_state", crash)
    with pytest.raises(RuntimeError, match="killed"):
        archive_pipeline(spec, catalog, spark=spark)
    monkeypatch.undo()
    # the crashed run's files are there, uncommitted; more arrives before the next run
    produce(kafka_bootstrap, topic, [(0, event(16, 16_000))])
    result = archive_pipeline(spec, catalog, spark=spark).streams[0]
    assert result.run == 2 and result.offsets == {0: (5, 9), 1: (5, 8)}
    archived = read_stream(archive_root(spec), stream, "ms")
    assert archived.column("id").to_pylist() == list(range(17))
    assert archived.to_pylist() == engine_view(spec, stream).to_pylist()


def test_arrival_order_streams_are_numbered_across_runs(
    spark, kafka_bootstrap, new_topic, tmp_path: Path, catalog: Catalog
):
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, [(0, event(1, 0)), (1, event(2, 0)), (0, b"{")])
    spec = load_pipeline(write_pipeline(tmp_path, topic, kafka_bootstrap, timestamp=False))
    archive_pipeline(spec, catalog, spark=spark)
    produce(kafka_bootstrap, topic, [(1, event(3, 0)), (0, event(4, 0))])
    archive_pipeline(spec, catalog, spark=spark)
    archived = read_stream(archive_root(spec), spec.streams["Sales"], "ms")
    # (partition, offset) order within a run, malformed messages keep their number
    assert archived.column("id").to_pylist() == [1, 2, 4, 3]
    assert archived.column("_ts").to_pylist() == [0, 2, 3, 4]
    assert np.all(np.diff(archived.column("_ts").to_numpy()) > 0)
    assert catalog.archive_state("kafka-archive", "Sales").next_position == 5
