"""The broker side of `cq bench kafka`: topics, their offsets and timestamps, and the events'
JSON encoding (confluent-kafka's admin client, consumer and nothing else)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid

import numpy as np
from confluent_kafka import KafkaException

__all__ = [
    "admin",
    "consumer",
    "count",
    "create_topic",
    "delete_topics",
    "encode",
    "end_offsets",
    "messages",
    "output_span",
    "topics_present",
]


def encode(cols: dict[str, np.ndarray]) -> list[bytes]:
    """The JSON message values of the events' rows."""
    names = [k for k in cols if not (k == "id" and "url" in cols)]  # NEXMark bids have no id
    rows = zip(*(cols[k].tolist() for k in names), strict=True)
    return [
        ("{" + ",".join(f'"{k}":{json.dumps(v)}' for k, v in zip(names, row, strict=True))
         + "}").encode()
        for row in rows
    ]


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int = 2, *,
                 append_time: bool = False) -> None:
    """A topic; with `append_time`, its messages are stamped by the broker when appended
    (LogAppendTime): the same clock for every engine, whatever timestamp its producer sets
    (Quix Streams copies the input message's)."""
    from confluent_kafka.admin import NewTopic

    config = {"message.timestamp.type": "LogAppendTime"} if append_time else {}
    client = admin(bootstrap)  # kept until the result is in: its handle serves the future
    futures = client.create_topics([NewTopic(topic, partitions, 1, config=config)])
    futures[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # ready: every partition has a leader that answers
        with contextlib.suppress(KafkaException, RuntimeError):  # not ready yet: asked again
            if len(end_offsets(bootstrap, topic)) == partitions:
                return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} not ready after 30 s")


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    if not topics:
        return
    client = admin(bootstrap)
    futures = client.delete_topics(topics, operation_timeout=30)
    for f in futures.values():
        with contextlib.suppress(KafkaException):  # already gone is fine
            f.result(30)


def topics_present(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=10).topics)


def consumer(bootstrap: str):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"cqbench-{uuid.uuid4().hex}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})


def end_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """(low, high) watermark offsets per partition."""
    from confluent_kafka import TopicPartition

    c = consumer(bootstrap)
    try:
        meta = c.list_topics(topic, timeout=10).topics[topic]
        if meta.error is not None:
            raise RuntimeError(f"{topic}: {meta.error}")
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                for p in meta.partitions}
    finally:
        c.close()


def count(bootstrap: str, topic: str) -> int:
    return sum(high - low for low, high in end_offsets(bootstrap, topic).values())


def output_span(bootstrap: str, topic: str) -> float | None:
    """Seconds between the first and the last message's timestamps in `topic`."""
    from confluent_kafka import TopicPartition

    offsets = end_offsets(bootstrap, topic)
    stamps = []
    c = consumer(bootstrap)
    try:
        for p, (low, high) in offsets.items():
            for off in {low, high - 1} if high > low else ():
                c.assign([TopicPartition(topic, p, off)])
                msg = None
                deadline = time.monotonic() + 30
                while msg is None and time.monotonic() < deadline:
                    msg = c.poll(1.0)
                    if msg is not None and msg.error():
                        msg = None
                if msg is not None:
                    stamps.append(msg.timestamp()[1])
    finally:
        c.close()
    return (max(stamps) - min(stamps)) / 1000 if len(stamps) >= 2 else None


def messages(bootstrap: str, topic: str):
    """Every message value of `topic`, decoded."""
    from confluent_kafka import TopicPartition

    offsets = end_offsets(bootstrap, topic)
    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, low) for p, (low, _) in offsets.items()])
        left = sum(high - low for low, high in offsets.values())
        while left > 0:
            for msg in c.consume(10_000, 5.0):
                if not msg.error():
                    left -= 1
                    yield json.loads(msg.value())
    finally:
        c.close()
