"""What every Kafka client cq makes shares: which client library (confluent-kafka by default,
kafka-python on request), the brokers' address, the settings cq owns or chooses, the interface
both libraries are adapted to (`ConsumerClient`, `ProducerClient`), and how an error is told
apart — a broker that cannot be reached now (retried) from a request the broker refuses for
good (an error). The adapters are in confluent_client.py and kafka_python_client.py;
kafka_connect.py opens the one a source or sink chose.

Neither library is imported with this module: a client is imported when it is made.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from cq_service.errors import Outage
from cq_service.io.reachability import Probe

T = TypeVar("T")

if TYPE_CHECKING:
    from cq_service.io.kafka_messages import Messages

__all__ = [
    "API_VERSION",
    "BOOTSTRAP_ENV",
    "CLIENTS",
    "CLIENT_DEFAULTS",
    "CLIENT_ENV",
    "DEFAULT_BOOTSTRAP",
    "DEFAULT_CLIENT",
    "OWN_CONSUMER",
    "OWN_PRODUCER",
    "ConsumerClient",
    "ConsumerConfig",
    "Failed",
    "KafkaCallError",
    "ProducerClient",
    "TopicMissing",
    "bootstrap_servers",
    "check_settings",
    "client_choice",
    "dependency_name",
    "describe_kafka_error",
    "is_retriable",
    "outage_of",
    "retrying",
]

# The client libraries a source or sink may use (`client:`), and the default: confluent-kafka
# (librdkafka) moves messages several times faster than kafka-python, pure Python.
CLIENTS = ("confluent-kafka", "kafka-python")
CLIENT_ENV = "CQ_KAFKA_CLIENT"  # the default for sources and sinks that do not say
DEFAULT_CLIENT = "confluent-kafka"

# Kafka 4 removed the oldest protocol versions (KIP-896), and kafka-python left to guess may
# still send one of them (dpkp/kafka-python#2679, DESIGN §9): every client pins this.
API_VERSION = (3, 9)
BOOTSTRAP_ENV = "CQ_KAFKA_BOOTSTRAP"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

# Settings the reader and the writers own: `consumer:` / `producer:` may not change them.
OWN_CONSUMER = frozenset(
    {
        "bootstrap_servers",
        "api_version",
        "group_id",
        "enable_auto_commit",
        "auto_offset_reset",
        "key_deserializer",
        "value_deserializer",
        "max_poll_records",
        "allow_auto_create_topics",
        "consumer_timeout_ms",
    }
)
OWN_PRODUCER = frozenset(
    {"bootstrap_servers", "api_version", "acks", "key_serializer", "value_serializer"}
)

# Defaults cq chooses (a `consumer:` / `producer:` setting wins): after a broker comes back,
# reconnect within a second rather than kafka-python's 30 s backoff ceiling; a producer's send
# never blocks the engine for long waiting for metadata (kafka-python: 60 s).
CLIENT_DEFAULTS: dict[str, dict[str, int]] = {
    "consumer": {"reconnect_backoff_max_ms": 1000},
    "producer": {"reconnect_backoff_max_ms": 1000, "max_block_ms": 5000},
    "admin": {"reconnect_backoff_max_ms": 1000},
}


def bootstrap_servers(
    option: str | Sequence[str] | None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The brokers to contact: the `bootstrap_servers` option (``host:port``, several
    comma-separated or as a list), else $CQ_KAFKA_BOOTSTRAP, else 127.0.0.1:9092."""
    value: str | Sequence[str] | None = option
    if value is None:
        env = os.environ if environ is None else environ
        value = env.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP
    items = value.split(",") if isinstance(value, str) else list(value)
    return [s.strip() for s in items if s.strip()]


def client_choice(option: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The client library a source or sink uses: its `client` option, else $CQ_KAFKA_CLIENT,
    else confluent-kafka. ValueError for a name that is not one of `CLIENTS`."""
    env = os.environ if environ is None else environ
    name = option or env.get(CLIENT_ENV) or DEFAULT_CLIENT
    if name not in CLIENTS:
        where = "client" if option else CLIENT_ENV
        raise ValueError(f"{where} must be one of {', '.join(CLIENTS)}, not {name!r}")
    return name


def dependency_name(servers: Sequence[str]) -> str:
    """How readiness reports and metrics name the brokers: ``kafka 127.0.0.1:9092``."""
    return f"kafka {','.join(servers)}"


def check_settings(
    settings: Mapping[str, Any], known: Collection[str], own: Collection[str], what: str
) -> str | None:
    """A reason if `settings` (a `consumer:`/`producer:` mapping) has keys kafka-python does
    not know or that cq sets itself."""
    if not isinstance(settings, Mapping):
        return f"{what} settings must be a mapping"
    taken = sorted(k for k in settings if k in own)
    if taken:
        return f"{what} setting(s) {', '.join(taken)} are set by cq and cannot be changed"
    unknown = sorted(k for k in settings if k not in known)
    if unknown:
        return (
            f"unknown {what} setting(s): {', '.join(unknown)} (see kafka-python's K{what.title()})"
        )
    return None


def is_retriable(error: BaseException) -> bool:
    """Whether a kafka-python error (or an OS error on its sockets) may go away by itself: a
    broker that is down, restarting or electing leaders, a request that timed out."""
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    if isinstance(error, OSError | KafkaConnectionError | KafkaTimeoutError):
        return True
    return bool(getattr(error, "retriable", False)) or type(error).__name__ in (
        "NoBrokersAvailable",
        "NodeNotReadyError",
    )


def describe_kafka_error(error: BaseException) -> str:
    """A short reason: ``connection refused`` for the usual ECONNREFUSED, else the error."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if "ECONNREFUSED" in text or "Connection refused" in text:
        return "connection refused"
    name = type(error).__name__
    return text if text.startswith(name) else f"{name}: {text}"


def outage_of(
    reason: str,
    servers: Sequence[str],
    role: str,
    probe: Probe | None,
    previous: Outage | None,
) -> Outage:
    """The outage of brokers that failed a request for `reason` — in plainer words when the
    probe finds they do not even accept connections (``connection refused``); it keeps the
    start of the `previous` one."""
    if probe is not None and not probe.check_now():
        reason = probe.reason
    if previous is not None:
        return previous.again(reason)
    return Outage(dependency_name(servers), role, reason, time.time())


# -- the interface both client libraries are adapted to ----------------------------------------


class KafkaCallError(Exception):
    """A call to the brokers failed, in either library's terms: `reason` is short (``connection
    refused``), `retriable` whether it may go away by itself (brokers away, a timeout)."""

    def __init__(self, reason: str, retriable: bool):
        super().__init__(reason)
        self.reason = reason
        self.retriable = retriable


def retrying(call: Callable[[], T], seconds: float, pause: float = 0.1) -> T:
    """`call()`, called again after a retriable `KafkaCallError` (a group coordinator moving,
    ``Not coordinator``; a broker restarting) for up to `seconds`, with pauses doubling from
    `pause` to 1 s; the last error is raised."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except KafkaCallError as e:
            if not e.retriable or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 1.0)


class TopicMissing(KafkaCallError):
    """The topic does not exist (a reader never creates it)."""

    def __init__(self, topic: str):
        super().__init__(f"topic {topic!r} does not exist", retriable=False)


@dataclass(frozen=True)
class ConsumerConfig:
    """What a consumer is made with: the brokers, the topic, the group it commits to (None:
    none), where a partition without a position starts (`reset`: earliest or latest), the most
    messages a poll returns, the user's `consumer:` settings (checked already), how often
    the topic's partitions are asked again, and whether `Messages.timestamp` is wanted (else a
    client may leave every one -1, as for a message without one)."""

    servers: Sequence[str]
    topic: str
    group: str | None
    reset: str
    max_records: int
    refresh_ms: int
    settings: Mapping[str, Any] = field(default_factory=dict)
    timestamps: bool = True


class ConsumerClient(Protocol):
    """A consumer of one topic's partitions (named by number), assigned by hand. Positions are
    the next offset to read, just after the last message `poll` returned. Calls to the brokers
    take `timeout_ms` (None: as long as it takes) and raise `KafkaCallError`. The reader
    seeks every partition it assigns before it polls; where one not sought would start is
    the client's own."""

    def partitions(self, timeout_ms: int | None) -> list[int]: ...  # TopicMissing if none
    def assign(self, partitions: Sequence[int]) -> None: ...  # the whole assignment
    def seek(self, partition: int, offset: int) -> None: ...
    def seek_to_beginning(self, partition: int, timeout_ms: int | None) -> None: ...
    def seek_to_end(self, partition: int, timeout_ms: int | None) -> None: ...
    def position(self, partition: int, timeout_ms: int | None) -> int | None: ...
    def committed(self, partition: int, timeout_ms: int | None) -> int | None: ...
    def end_offsets(self, partitions: Sequence[int], timeout_ms: int | None) -> dict[int, int]: ...
    def highwater(self, partition: int) -> int | None: ...  # as the last fetch told; no call
    # At most `max_records`, waiting at most `timeout_ms`; `prompt`: return as soon as any are
    # there (a live reader) rather than waiting to fill the batch (reading a backlog).
    def poll(self, timeout_ms: int, max_records: int, prompt: bool = False) -> Messages: ...
    def commit(self, offsets: Mapping[int, int], metadata: str, timeout_ms: int | None) -> None: ...
    def pause(self, partitions: Sequence[int]) -> None: ...
    def resume(self, partitions: Sequence[int]) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Failed:
    """A message a producer gave up on (or dropped, when aborted), with why: the writer sends
    it again, or reports it if it was refused for good."""

    error: KafkaCallError
    topic: str
    value: bytes | None
    key: bytes | None
    headers: list[tuple[str, bytes]] | None


class ProducerClient(Protocol):
    """A producer (acks=all, idempotent). `send_many` hands messages over in order (a
    KafkaCallError from it carries `handed`: how many were handed over before it). The producer
    counts the messages neither acknowledged nor given up on (`unsettled`) and keeps each it
    gave up on, bytes and all, until `failures` takes them (in the order it gave them up; a
    partition's in the order sent)."""

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None,
        headers: Sequence[list[tuple[str, bytes]] | None] | None,
    ) -> None: ...
    def unsettled(self) -> int: ...
    def failures(self) -> list[Failed]: ...
    def flush(self, timeout: float) -> None: ...  # wait up to `timeout` s for acknowledgements
    def abort(self) -> list[Failed]: ...  # drop what is unsettled, as failures; then closed
    def close(self, timeout: float) -> None: ...
