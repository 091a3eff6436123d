"""The test services are real: Kafka keeps keyed messages and group offsets; PostgreSQL, rows."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Callable

import sqlalchemy as sa
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import OffsetSpec
from kafka.consumer.fetcher import ConsumerRecord
from kafka.serializer import DefaultSerializer, JsonSerializer
from kafka.structs import TopicPartition

from tests.services.kafka import KAFKA_API_VERSION

MESSAGES = 300
KEYS = 17


def _consumer(bootstrap: str, group: str, **config: object) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION, group_id=group,
        enable_auto_commit=False, auto_offset_reset="earliest",
        key_deserializer=DefaultSerializer(), value_deserializer=JsonSerializer(), **config,
    )


def _poll_exactly(
    consumer: KafkaConsumer, count: int, timeout_s: float = 30.0
) -> list[ConsumerRecord]:
    """Poll until `count` records arrived (failing on timeout), then check nothing more comes."""
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    assert len(records) == count, f"got {len(records)} of {count} records in {timeout_s} s"
    extra = [r for batch in consumer.poll(timeout_ms=500).values() for r in batch]
    assert extra == []
    return records


def test_kafka_keeps_keyed_messages_and_group_offsets(
    kafka_bootstrap: str, kafka_admin: KafkaAdminClient, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=3)
    partitions = [TopicPartition(topic, p) for p in range(3)]
    sent = [{"i": i, "key": f"k{i % KEYS}"} for i in range(MESSAGES)]

    producer = KafkaProducer(
        bootstrap_servers=kafka_bootstrap, api_version=KAFKA_API_VERSION, acks="all",
        key_serializer=DefaultSerializer(), value_serializer=JsonSerializer(),
    )
    try:
        futures = [producer.send(topic, key=value["key"], value=value) for value in sent]
        producer.flush(timeout=30)
        metadata = [future.get(timeout=30) for future in futures]
    finally:
        producer.close()
    assert {m.partition for m in metadata} == {0, 1, 2}, "17 keys should reach all 3 partitions"

    group = f"cq-test-{uuid.uuid4().hex[:8]}"
    consumer = _consumer(kafka_bootstrap, group)
    try:
        consumer.subscribe([topic])
        records = _poll_exactly(consumer, MESSAGES)
        consumer.commit()
        end_offsets = consumer.end_offsets(partitions)
        committed = {tp: consumer.committed(tp) for tp in partitions}
    finally:
        consumer.close()

    assert sorted(r.value["i"] for r in records) == list(range(MESSAGES))
    assert all(r.key == r.value["key"] for r in records)
    partitions_of_key: dict[str, set[int]] = defaultdict(set)
    for record in records:
        partitions_of_key[record.key].add(record.partition)
    assert all(len(ps) == 1 for ps in partitions_of_key.values()), "a key moved partitions"
    per_partition = {tp: sum(r.partition == tp.partition for r in records) for tp in partitions}
    assert end_offsets == per_partition
    assert committed == end_offsets
    assert sum(end_offsets.values()) == MESSAGES

    latest = kafka_admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions})
    assert {tp: latest[tp].offset for tp in partitions} == end_offsets
    group_offsets = kafka_admin.list_group_offsets({group: None})[group]
    assert {tp: group_offsets[tp].offset for tp in partitions} == end_offsets

    reopened = _consumer(kafka_bootstrap, group)
    try:
        reopened.assign(partitions)
        assert {tp: reopened.committed(tp) for tp in partitions} == end_offsets
        assert {tp: reopened.position(tp) for tp in partitions} == end_offsets
        assert reopened.poll(timeout_ms=1000) == {}, "the committed group re-read messages"
        reopened.seek_to_beginning()
        again = _poll_exactly(reopened, MESSAGES)
    finally:
        reopened.close()
    assert sorted(r.value["i"] for r in again) == list(range(MESSAGES))


def test_postgresql_fresh_database_keeps_rows(database_url: str, fresh_database_url: str) -> None:
    engine = sa.create_engine(fresh_database_url)
    try:
        with engine.begin() as connection:
            version = connection.execute(sa.text("SHOW server_version")).scalar_one()
            version_num = int(connection.execute(sa.text("SHOW server_version_num")).scalar_one())
            banner = connection.execute(sa.text("SELECT version()")).scalar_one()
            database = connection.execute(sa.text("SELECT current_database()")).scalar_one()
            tables = sa.inspect(connection).get_table_names()
            connection.execute(sa.text(
                "CREATE TABLE readings (id serial PRIMARY KEY, name text NOT NULL,"
                " value double precision, at timestamptz DEFAULT now())"
            ))
            connection.execute(
                sa.text("INSERT INTO readings (name, value) VALUES (:name, :value)"),
                [{"name": f"r{i}", "value": i / 4} for i in range(50)],
            )
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text("SELECT name, value FROM readings ORDER BY id")
            ).all()
            jsonb = sa.text("SELECT pg_typeof('{}'::jsonb)::text")
            is_jsonb = connection.execute(jsonb).scalar_one()
    finally:
        engine.dispose()

    assert engine.dialect.name == "postgresql"
    assert banner.startswith("PostgreSQL "), banner
    assert version_num >= 130000, version
    assert database == sa.make_url(fresh_database_url).database
    assert database != sa.make_url(database_url).database
    assert tables == [], "a fresh database should be empty"
    assert rows == [(f"r{i}", i / 4) for i in range(50)]
    assert is_jsonb == "jsonb"


def test_fresh_databases_are_separate(fresh_database_url: str, database_url: str) -> None:
    """A table made in a fresh database is not in the server's main database."""
    fresh = sa.create_engine(fresh_database_url)
    main = sa.create_engine(database_url)
    table = f"only_here_{uuid.uuid4().hex[:8]}"
    try:
        with fresh.begin() as connection:
            connection.execute(sa.text(f"CREATE TABLE {table} (x int)"))
        with main.connect() as connection:
            assert table not in sa.inspect(connection).get_table_names()
    finally:
        fresh.dispose()
        main.dispose()


def test_sqlite_url_is_a_file(sqlite_url: str) -> None:
    engine = sa.create_engine(sqlite_url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("CREATE TABLE t (x int)"))
            connection.execute(sa.text("INSERT INTO t VALUES (1), (2)"))
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT sum(x) FROM t")).scalar_one() == 3
    finally:
        engine.dispose()
    assert sa.make_url(sqlite_url).database.endswith("catalog.sqlite")
