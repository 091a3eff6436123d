"""A worker with its Kafka broker and PostgreSQL catalog, for the end-to-end test: in Docker
containers (the images `make containers` builds) wherever a Docker daemon answers, else the
worker as a local `cq serve` process on the local services (tests/services) as the fallback.

`stack_path()` says which one runs and why; both offer the same operations (`Stack`).
"""

from __future__ import annotations

import io
import os
import socket
import tarfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import sqlalchemy as sa

from tests.containers.images import IMAGES, KAFKA_IMAGE, POSTGRES_IMAGE, WORKER_IMAGE
from tests.services import kafka

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

__all__ = [
    "CONTAINERS",
    "LOCAL",
    "Stack",
    "StackPath",
    "kafka_container",
    "postgres_container",
    "stack",
    "stack_path",
]

CONTAINERS = "containers"
LOCAL = "local services"
WORKER_ENV = {"CQ_TOKEN": "t", "CQ_CHECKPOINT_INTERVAL": "0.2", "CQ_RECONCILE_INTERVAL": "0.3"}
START_TIMEOUT_S = 120.0


class StackPath(UserWarning):
    """Which path tests/containers ran on, and why (shown in pytest's warnings summary)."""


class Stack(Protocol):
    """What the test needs: the broker's address from here, the catalog's URL from here, and the
    worker to deploy a pipeline to, ask for /healthz, kill and start again."""

    path: str
    bootstrap: str
    catalog_url: str

    def deploy(self, name: str, text: str) -> None: ...
    def healthz(self) -> int: ...
    def wait_healthy(self) -> None: ...
    def kill(self) -> None: ...
    def restart(self) -> None: ...


def stack_path() -> tuple[str, str]:
    """(CONTAINERS or LOCAL, why). $CQ_TEST_CONTAINERS=off forces the local services. With a
    Docker daemon the containers are used, and their images must have been built."""
    if os.environ.get("CQ_TEST_CONTAINERS", "auto") == "off":
        return LOCAL, "CQ_TEST_CONTAINERS=off"
    try:
        import docker
        from docker.errors import DockerException, ImageNotFound

        client = docker.from_env(timeout=5)
    except (ImportError, DockerException) as error:
        return LOCAL, f"no Docker daemon ({type(error).__name__})"
    try:
        client.ping()
    except (DockerException, OSError) as error:  # requests' errors are OSErrors
        return LOCAL, f"no Docker daemon answers ({type(error).__name__})"
    try:
        missing = []
        for image in IMAGES:
            try:
                client.images.get(image)
            except ImageNotFound:
                missing.append(image)
    finally:
        client.close()
    if missing:
        raise RuntimeError(
            f"a Docker daemon answers but {', '.join(missing)} is not built: "
            "run `make containers` (or set CQ_TEST_CONTAINERS=off)"
        )
    return CONTAINERS, f"Docker daemon answers; images {', '.join(IMAGES)}"


@contextmanager
def stack() -> Iterator[Stack]:
    """The stack `stack_path()` picks, started; everything it started is removed afterwards."""
    path, _ = stack_path()
    with ExitStack() as cleanup:
        yield (_ContainerStack if path == CONTAINERS else _LocalStack)(cleanup)


@contextmanager
def kafka_container(network: Network | None = None) -> Iterator[str]:
    """A broker in a container of the local Kafka image, answering; yields its bootstrap address
    from this host (a published port it advertises). On `network` it is also kafka:9094."""
    from testcontainers.core.container import DockerContainer

    _no_ryuk()
    port = _free_port()  # advertised: so it is chosen here, not by Docker
    broker = DockerContainer(KAFKA_IMAGE, network=network, network_aliases=["kafka"])
    broker.with_bind_ports(9092, port)
    broker.with_env("KAFKA_HOST_ADVERTISED", f"127.0.0.1:{port}")
    broker.with_env("KAFKA_NET_ADVERTISED", "kafka:9094")
    with broker:
        bootstrap = f"127.0.0.1:{port}"
        _wait_until(lambda: kafka.answers(bootstrap, timeout_s=2.0), "kafka", broker)
        yield bootstrap


@contextmanager
def postgres_container(network: Network | None = None) -> Iterator[str]:
    """A server in a container of the local PostgreSQL image, answering; yields the URL of its
    `cq` database from this host (a published random port). On `network` it is also
    postgres:5432."""
    from testcontainers.core.container import DockerContainer

    _no_ryuk()
    server = DockerContainer(POSTGRES_IMAGE, network=network, network_aliases=["postgres"])
    server.with_exposed_ports(5432)
    with server:
        url = f"postgresql+psycopg://cq:cq@127.0.0.1:{server.get_exposed_port(5432)}/cq"
        _wait_until(lambda: _database_answers(url), "postgresql", server)
        yield url


class _ContainerStack:
    """Three containers on a Docker network of their own. The worker reaches Kafka at
    kafka:9094 and PostgreSQL at postgres:5432; the test reaches the broker, the database and
    the worker's API through published ports."""

    path = CONTAINERS

    def __init__(self, cleanup: ExitStack):
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.network import Network

        _no_ryuk()
        network = cleanup.enter_context(Network())
        self.catalog_url = cleanup.enter_context(postgres_container(network))
        self.bootstrap = cleanup.enter_context(kafka_container(network))
        worker = DockerContainer(WORKER_IMAGE, network=network)
        worker.with_exposed_ports(8080)
        for name, value in {
            **WORKER_ENV,
            "CQ_KAFKA_BOOTSTRAP": "kafka:9094",
            "CQ_CATALOG": "postgresql+psycopg://cq:cq@postgres:5432/cq",
            "CQ_WORKER_NAME": "e2e",
        }.items():
            worker.with_env(name, value)
        self.worker = cleanup.enter_context(worker)
        self._wait_healthy()

    def deploy(self, name: str, text: str) -> None:
        data = text.encode()
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(data), 0o644, 10001, 10001
            tar.addfile(info, io.BytesIO(data))
        self.worker.get_wrapped_container().put_archive("/pipelines", archive.getvalue())

    def healthz(self) -> int:
        url = (
            f"http://{self.worker.get_container_host_ip()}:"
            f"{self.worker.get_exposed_port(8080)}/healthz"
        )
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status

    def wait_healthy(self) -> None:
        """Wait until Docker runs the image's HEALTHCHECK (on /healthz) and calls it healthy."""
        container = self.worker.get_wrapped_container()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            container.reload()
            if container.attrs["State"]["Health"]["Status"] == "healthy":
                return
            time.sleep(1)
        raise AssertionError(f"not healthy: {container.attrs['State']['Health']}")

    def kill(self) -> None:
        """`docker kill`: SIGKILL, the container stays with its file system."""
        container = self.worker.get_wrapped_container()
        container.kill()
        container.reload()
        assert container.status == "exited", container.status

    def restart(self) -> None:
        self.worker.get_wrapped_container().start()  # its API gets a new published port
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        _wait_until(lambda: _answers(self.healthz), "the worker", self.worker)


class _LocalStack:
    """The fallback: `cq serve` as a process of its own, on the local Kafka and on a new
    database of the local PostgreSQL (dropped afterwards)."""

    path = LOCAL

    def __init__(self, cleanup: ExitStack):
        import tempfile

        from tests.integration.worker_process import Worker, free_port
        from tests.services import up

        services = up()
        self.bootstrap = services.kafka_bootstrap
        self.catalog_url = cleanup.enter_context(_new_database(services.database_url))
        folder = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="cq-e2e-")))
        (folder / "pipelines").mkdir()
        self.folder = folder
        self.worker = Worker(folder, self.catalog_url, self.bootstrap, free_port())
        self.worker.env.update(WORKER_ENV)
        cleanup.callback(self.worker.stop)
        self.worker.start()

    def deploy(self, name: str, text: str) -> None:
        (self.folder / "pipelines" / name).write_text(text)

    def healthz(self) -> int:
        url = f"http://127.0.0.1:{self.worker.port}/healthz"
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status

    def wait_healthy(self) -> None:
        """A local process has no Docker health check: /healthz answering is all."""
        assert self.healthz() == 200

    def kill(self) -> None:
        self.worker.kill()

    def restart(self) -> None:
        self.worker.start()


@contextmanager
def _new_database(server_url: str) -> Iterator[str]:
    name = f"cq_e2e_{uuid.uuid4().hex[:12]}"
    server = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
        with server.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        server.dispose()


def _database_answers(url: str) -> bool:
    engine = sa.create_engine(url, connect_args={"connect_timeout": 2})
    try:
        with engine.connect() as connection:
            return connection.execute(sa.text("SELECT 1")).scalar() == 1
    except sa.exc.OperationalError:
        return False
    finally:
        engine.dispose()


def _answers(get_status: Callable[[], int]) -> bool:
    try:
        return get_status() == 200
    except OSError:
        return False


def _wait_until(ready: Callable[[], bool], what: str, container: DockerContainer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready():
            return
        wrapped = container.get_wrapped_container()
        wrapped.reload()
        if wrapped.status == "exited":
            break
        time.sleep(0.5)
    logs = b"".join(container.get_logs()).decode(errors="replace")[-4000:]
    raise RuntimeError(f"{what} did not answer within {START_TIMEOUT_S:.0f} s:\n{logs}")


def _no_ryuk() -> None:
    """testcontainers' reaper, Ryuk, is an image from a registry: off (we remove our own)."""
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
