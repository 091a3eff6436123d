"""Kafka sources and sinks in pipeline files: their options, typed, and every mistake reported
at its line and column."""

from __future__ import annotations

import pytest

HEADER = "version: 1\nname: web\n"


def kafka_stream(source: str, extra: str = "") -> str:
    return (
        HEADER
        + "streams:\n  S:\n    schema: {k: int, v: string, ts: int}\n    timestamp: ts\n"
        + f"    source: {{type: kafka, {source}}}\n"
        + extra
    )


def test_kafka_source_and_sink(load):
    spec = load(
        kafka_stream(
            "topic: requests, bootstrap_servers: '127.0.0.1:19092', key: k, "
            "dead_letter_topic: requests.dlq, start: committed, time: record, "
            "idle_timeout: 1500 ms, consumer: {fetch_max_wait_ms: 100}",
            "    max_delay: 100\n"
            "queries:\n"
            "  q:\n"
            "    cql: SELECT * FROM S\n"
            "    sink: {type: kafka, topic: out, key: [k, v], producer: {linger_ms: 5}}\n"
            "  r:\n"
            "    cql: SELECT * FROM S\n"
            "    sink: {type: kafka, topic: out2, key: k}\n",
        )
    )
    source = spec.streams["S"].source
    assert source.type == "kafka" and source.path is None
    assert source.options == {
        "topic": "requests",
        "bootstrap_servers": "127.0.0.1:19092",
        "group": "cq.web.S",
        "key": "k",
        "dead_letter_topic": "requests.dlq",
        "start": "committed",
        "time": "record",
        "idle_timeout": 1.5,
        "consumer": {"fetch_max_wait_ms": 100},
    }
    assert spec.streams["S"].max_delay == 100
    sink = spec.queries["q"].sink
    assert sink is not None and sink.type == "kafka"
    assert sink.options == {"topic": "out", "key": ["k", "v"], "producer": {"linger_ms": 5}}
    assert spec.queries["r"].sink.options == {"topic": "out2", "key": ["k"]}


def test_minimal_kafka_source_takes_defaults_when_read(load):
    spec = load(kafka_stream("topic: requests, group: mine"))
    assert spec.streams["S"].source.options == {"topic": "requests", "group": "mine"}


def test_kafka_relation_and_dead_letter(load):
    spec = load(
        HEADER
        + "relations:\n  R:\n    schema: {k: int}\n    source: {type: kafka, topic: r}\n"
        + "dead_letter: {type: kafka, topic: web.dead, bootstrap_servers: [a:1, b:2]}\n"
    )
    assert spec.relations["R"].source.options == {"topic": "r", "group": "cq.web.R"}
    assert spec.dead_letter.type == "kafka"
    assert spec.dead_letter.options == {"topic": "web.dead", "bootstrap_servers": ["a:1", "b:2"]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            kafka_stream("group: g"),
            ["7:5: missing key 'topic' in the source of stream 'S'"],
            id="missing-topic",
        ),
        pytest.param(
            kafka_stream("topic: 'a topic'"),
            [
                "7:34: topic of the source of stream 'S' 'a topic' is not a Kafka topic name "
                "(letters, digits, '.', '_' and '-', at most 249)"
            ],
            id="bad-topic-name",
        ),
        pytest.param(
            kafka_stream("topic: t, bootstrap_servers: localhost"),
            [
                "7:56: bootstrap_servers of the source of stream 'S' 'localhost' is not "
                "host:port, or several separated by commas, e.g. "
                "'broker-1:9092,broker-2:9092'"
            ],
            id="bad-bootstrap",
        ),
        pytest.param(
            kafka_stream("topic: t, bootstrap_servers: [a:1, b]"),
            [
                "7:62: 1 of the bootstrap_servers of the source of stream 'S' 'b' is not host:port, "
                "e.g. 'broker-1:9092'"
            ],
            id="bad-bootstrap-item",
        ),
        pytest.param(
            kafka_stream("topic: t, path: x.csv"),
            [
                "7:37: key 'path' is not allowed in the source of stream 'S': a source of type "
                "'kafka' takes only topic, bootstrap_servers, group, key, dead_letter_topic, "
                "start, time, idle_timeout, client, consumer"
            ],
            id="file-key-on-kafka",
        ),
        pytest.param(
            kafka_stream("topic: t, partitions: 3"),
            [
                "7:37: unknown key 'partitions' in the source of stream 'S' (expected one of: "
                "type, topic, bootstrap_servers, group, key, dead_letter_topic, start, time, "
                "idle_timeout, client, consumer)"
            ],
            id="unknown-key",
        ),
        pytest.param(
            kafka_stream("topic: t, start: beginning"),
            [
                "7:44: start of the source of stream 'S' must be one of earliest, latest, "
                "committed, got 'beginning'"
            ],
            id="bad-start",
        ),
        pytest.param(
            kafka_stream("topic: t, time: wallclock"),
            [
                "7:43: time of the source of stream 'S' must be one of value, record, got "
                "'wallclock'"
            ],
            id="bad-time",
        ),
        pytest.param(
            kafka_stream("topic: t, idle_timeout: -2"),
            ["7:51: idle_timeout of the source of stream 'S' must be >= 0, got -2"],
            id="idle-timeout-negative",
        ),
        pytest.param(
            kafka_stream("topic: t, idle_timeout: 2 fortnights"),
            [
                "7:51: idle_timeout of the source of stream 'S': unknown unit 'fortnights' in "
                "duration '2 fortnights' (use ns, us, ms, s, min, h, d or their names, e.g. "
                "'seconds')"
            ],
            id="idle-timeout-unit",
        ),
        pytest.param(
            kafka_stream("topic: t, key: client"),
            [
                "7:42: key 'client' of the source of stream 'S' is not a column of its schema "
                "(k, v, ts)"
            ],
            id="key-not-in-schema",
        ),
        pytest.param(
            HEADER
            + "streams:\n  S:\n    schema: {k: int}\n"
            + "    source: {type: kafka, topic: t, time: record}\n",
            [
                "6:43: time: record in the source of stream 'S' fills the stream's timestamp "
                "field with the message timestamps, but the stream has no `timestamp:`"
            ],
            id="record-time-without-timestamp",
        ),
        pytest.param(
            kafka_stream("topic: t, consumer: 5"),
            ["7:47: consumer of the source of stream 'S' must be a mapping, got 5"],
            id="consumer-not-a-mapping",
        ),
        pytest.param(
            HEADER
            + "streams:\n  S:\n    schema: {k: int}\n    source: {type: file, path: data/s.csv, "
            + "topic: t}\n",
            [
                "6:44: 'topic' only applies to kafka sources, but the source of stream 'S' is of "
                "type file"
            ],
            id="kafka-key-on-file",
        ),
        pytest.param(
            kafka_stream(
                "topic: t",
                "queries:\n  q:\n    cql: SELECT * FROM S\n    sink: {type: kafka}\n",
            ),
            ["11:5: missing key 'topic' in the sink of query 'q'"],
            id="sink-missing-topic",
        ),
        pytest.param(
            kafka_stream(
                "topic: t",
                "queries:\n  q:\n    cql: SELECT * FROM S\n"
                "    sink: {type: kafka, topic: o, path: x.jsonl}\n",
            ),
            [
                "11:35: key 'path' is not allowed in the sink of query 'q': a sink of type "
                "'kafka' takes only topic, bootstrap_servers, key, client, producer"
            ],
            id="file-key-on-kafka-sink",
        ),
        pytest.param(
            kafka_stream(
                "topic: t",
                "queries:\n  q:\n    cql: SELECT * FROM S\n"
                "    sink: {type: file, path: o.jsonl, topic: o}\n",
            ),
            [
                "11:39: key 'topic' is not allowed in the sink of query 'q': a sink of type "
                "'file' takes only path, format"
            ],
            id="kafka-key-on-file-sink",
        ),
        pytest.param(
            kafka_stream(
                "topic: t",
                "queries:\n  q:\n    cql: SELECT * FROM S\n"
                "    sink: {type: kafka, topic: o, key: []}\n",
            ),
            ["11:40: key of the sink of query 'q' must not be empty"],
            id="sink-key-empty",
        ),
        pytest.param(
            kafka_stream(
                "topic: t",
                "queries:\n  q:\n    cql: SELECT * FROM S\n    sink: {type: kafka, topic: t}\n",
            ),
            [
                "11:32: sink topic 't' of query 'q' is the source of stream 'S'; writing it "
                "would feed the results back in"
            ],
            id="sink-topic-is-a-source",
        ),
    ],
)
def test_kafka_problems(problems, text, expected):
    assert problems(text) == expected


def test_same_topic_on_another_cluster_is_fine(load):
    spec = load(
        kafka_stream(
            "topic: t, bootstrap_servers: 'a:1'",
            "queries:\n  q:\n    cql: SELECT * FROM S\n"
            "    sink: {type: kafka, topic: t, bootstrap_servers: 'b:1'}\n",
        )
    )
    assert spec.queries["q"].sink.options["topic"] == "t"


def test_idle_timeout_as_a_number_is_in_time_unit(load):
    spec = load(
        kafka_stream("topic: t, idle_timeout: 3").replace(
            "name: web\n", "name: web\ntime_unit: s\n"
        )
    )
    assert spec.streams["S"].source.options["idle_timeout"] == 3.0
