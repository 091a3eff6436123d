"""Open the Kafka client a source or sink chose (`client:`, docs/kafka.md "Clients"): the
confluent-kafka or kafka-python adapter behind `ConsumerClient` / `ProducerClient`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cq_service.io.kafka_client import ConsumerClient, ConsumerConfig, ProducerClient

__all__ = ["dead_letter_settings", "open_consumer", "open_producer", "settings_reason"]


def settings_reason(client: str, settings: Any, what: str) -> str | None:
    """Why the `consumer:` or `producer:` (`what`) settings cannot be used with `client`, found
    without contacting a broker; None if they can."""
    if not isinstance(settings, Mapping):
        return f"{what} settings must be a mapping"
    if client == "kafka-python":
        from cq_service.io import kafka_python_client as python

        check = python.consumer_settings_reason if what == "consumer" else python.producer_settings_reason
        return check(settings)
    from cq_service.io.confluent_client import settings_reason as librdkafka_reason

    return librdkafka_reason(settings, what)


def open_consumer(client: str, config: ConsumerConfig) -> tuple[ConsumerClient, list[int]]:
    """A consumer made with `config` (its settings checked by `settings_reason`) and the
    topic's partitions. KafkaCallError (TopicMissing when the topic does not exist) if it
    cannot be made or the topic cannot be described."""
    consumer: Any
    if client == "kafka-python":
        from cq_service.io.kafka_python_client import PythonConsumer

        consumer = PythonConsumer(config)
    else:
        from cq_service.io.confluent_client import ConfluentConsumer

        consumer = ConfluentConsumer(config)
    try:
        return consumer, consumer.describe()
    except BaseException:
        consumer.close()
        raise


def open_producer(client: str, servers: Sequence[str], settings: Mapping[str, Any]) -> ProducerClient:
    """A producer (acks=all) with `settings` (checked by `settings_reason`). KafkaCallError if
    it cannot be made."""
    if client == "kafka-python":
        from cq_service.io.kafka_python_client import PythonProducer

        return PythonProducer(servers, settings)
    from cq_service.io.confluent_client import ConfluentProducer

    return ConfluentProducer(servers, settings)


def dead_letter_settings(client: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The `consumer:` settings a source's dead-letter producer uses too (security and the
    like): kafka-python's that KafkaProducer knows; librdkafka's global properties."""
    if client == "kafka-python":
        from cq_service.io.kafka_python_client import producer_part

        return producer_part(settings)
    consumer_only = ("fetch.", "queued.", "group.", "session.", "heartbeat.", "max.poll",
                     "partition.assignment", "isolation.", "check.crcs", "auto.commit",
                     "enable.auto", "auto.offset")  # fmt: skip
    return {
        k: v for k, v in settings.items() if not str(k).replace("_", ".").startswith(consumer_only)
    }
