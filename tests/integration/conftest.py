"""Fixtures for tests against real Kafka, PostgreSQL and Spark (every test here is
`integration`).

Each service comes from, in order: the environment (CQ_TEST_KAFKA, CQ_TEST_DATABASE_URL);
testcontainers, with CQ_TEST_CONTAINERS=all and a Docker engine that answers (the images `make
containers` builds here, no registry: tests/containers/stack.py); else the local services of
`make services` (tests/services), started on demand — idempotent and locked, so parallel
workers share them. The local services are the default even where Docker runs: this suite's
own brokers and servers (`own_kafka`, `own_postgres`), its Spark cluster and its timings are
built around them; tests/containers runs the end-to-end test through containers.

Those are shared and are never stopped. A test that stops a dependency and starts it again
takes one of its own instead: `own_kafka`, `own_postgres` (tests/services/own.py).

`spark_cluster` is a Spark standalone master and two workers (tests/services/spark.py), started
for the session by the first test that asks for it and stopped at its end: one per test process
(pytest-xdist workers that each run one of its tests each start their own, on other ports).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa
from kafka import KafkaAdminClient
from kafka.admin import OffsetSpec
from kafka.structs import TopicPartition

from tests.services.kafka import KAFKA_API_VERSION
from tests.services.own import OwnKafka, OwnPostgres
from tests.services.spark import SparkCluster

if TYPE_CHECKING:
    from tests.services import Services

_INTEGRATION_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/integration as `integration`."""
    for item in items:
        if _INTEGRATION_DIR in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def services_in_containers() -> bool:
    """Whether this suite runs its services in containers: CQ_TEST_CONTAINERS=all and a Docker
    engine that answers."""
    if os.environ.get("CQ_TEST_CONTAINERS") != "all":
        return False
    from tests.containers.stack import CONTAINERS, stack_path

    return stack_path()[0] == CONTAINERS


@pytest.fixture(scope="session")
def kafka_bootstrap(services_in_containers: bool) -> Iterator[str]:
    """A Kafka 4.x broker's bootstrap address, "host:port"."""
    if address := os.environ.get("CQ_TEST_KAFKA"):
        yield address
    elif services_in_containers:
        from tests.containers.stack import kafka_container

        with kafka_container() as bootstrap:
            yield bootstrap
    else:
        yield _local_services().kafka_bootstrap


@pytest.fixture(scope="session")
def database_url(services_in_containers: bool) -> Iterator[str]:
    """A PostgreSQL database's SQLAlchemy URL (postgresql+psycopg); its role may create others."""
    if url := os.environ.get("CQ_TEST_DATABASE_URL"):
        yield url
    elif services_in_containers:
        from tests.containers.stack import postgres_container

        with postgres_container() as url:
            yield url
    else:
        yield _local_services().database_url


@pytest.fixture
def fresh_database_url(database_url: str) -> Iterator[str]:
    """The URL of a new, empty, uniquely named database on that server; dropped afterwards."""
    name = f"cq_test_{uuid.uuid4().hex[:12]}"
    server = sa.create_engine(database_url, isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield sa.make_url(database_url).set(database=name).render_as_string(hide_password=False)
        with server.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        server.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The SQLAlchemy URL of an SQLite database file in the test's tmp_path."""
    return f"sqlite:///{tmp_path / 'catalog.sqlite'}"


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap: str) -> Iterator[KafkaAdminClient]:
    """An admin client for the test broker, shared by the session."""
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, api_version=KAFKA_API_VERSION,
                             client_id="cq-tests-admin")
    yield admin
    admin.close()


@pytest.fixture(params=["confluent-kafka", "kafka-python"])
def kafka_client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once per Kafka client library: the default of every Kafka source and sink
    (CQ_KAFKA_CLIENT, inherited by the workers a test starts) is this one. Modules whose tests
    must hold for both use it with ``pytestmark = pytest.mark.usefixtures("kafka_client")``."""
    monkeypatch.setenv("CQ_KAFKA_CLIENT", request.param)
    return request.param


@pytest.fixture
def new_topic(kafka_admin: KafkaAdminClient) -> Iterator[Callable[..., str]]:
    """Factory: `new_topic(partitions=1) -> name` creates a uniquely named, ready topic.

    Ready means every partition has a leader that answers a ListOffsets request. The topics are
    deleted after the test.
    """
    created: list[str] = []

    def create(partitions: int = 1) -> str:
        name = f"cq-test-{uuid.uuid4().hex[:12]}"
        kafka_admin.create_topics(
            {name: {"num_partitions": partitions, "replication_factor": 1}},
            wait_for_metadata=True,
        )
        created.append(name)
        kafka_admin.wait_for_topics([name], timeout_ms=30_000)
        kafka_admin.list_partition_offsets(
            {TopicPartition(name, p): OffsetSpec.LATEST for p in range(partitions)},
            timeout_ms=30_000,
        )
        return name

    yield create
    if created:
        kafka_admin.delete_topics(created, raise_errors=False)


@pytest.fixture
def own_kafka() -> Iterator[OwnKafka]:
    """A Kafka broker of this test's own, started (free ports, its own data): `stop()` and
    `start()` it at will; removed after the test."""
    with OwnKafka() as broker:
        yield broker


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    """A PostgreSQL server of this test's own, started (`url`: its `cq` database): `stop()`
    and `start()` it at will; removed after the test."""
    with OwnPostgres() as server:
        yield server


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    """A Spark standalone cluster on 127.0.0.1: a master (`master_url`, spark://127.0.0.1:7077
    unless that port is taken) and two workers of one core and 2 GiB each, every one ALIVE.
    `stop_worker(i)` and `start_worker(i)` restart a worker; `driver_env()` is the environment
    of a driver (`cq backfill --master ...`) whose event logs `events()` reads."""
    with SparkCluster(workers=2, cores=1, memory="2g") as cluster:
        yield cluster


def _local_services() -> Services:
    """Start (or find) the local services; imported late so Docker users never need them."""
    from tests.services import up

    return up()
