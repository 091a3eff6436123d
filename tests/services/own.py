"""A Kafka broker or a PostgreSQL server of one test's own, to stop and start again at will.

The shared services (`python -m tests.services up`: Kafka on 19092, PostgreSQL on 15432) are
used by every test and engineer and must never be stopped. A test that needs a dependency to
go away and come back starts its own instead, on free ports with a state directory of its own:

    with OwnKafka() as kafka:             # started; kafka.bootstrap is "127.0.0.1:PORT"
        ...
        kafka.stop()                      # SIGTERM (kill=True: SIGKILL, as a crash)
        kafka.start()                     # the same port, the same data
    # stopped and its directory removed

`OwnPostgres` is the same for a PostgreSQL server (`url`: its `cq` database). Both can be used
as pytest fixtures (tests/integration/conftest.py: `own_kafka`, `own_postgres`).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.services import STATE_DIR, kafka, postgres

__all__ = ["OwnKafka", "OwnPostgres", "free_port"]

# Kafka's jars are resolved by Maven once and the classpath cached here, for every own broker.
_CLASSPATH_CACHE = STATE_DIR / "own-kafka-classpath.txt"


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's choice; never a shared service's)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in (kafka.BROKER_PORT, kafka.CONTROLLER_PORT, postgres.PORT):
            return port


class _Own:
    """A service started in a fresh directory under the system's temporary folder (PostgreSQL
    run as the `postgres` user must be able to reach it, which pytest's tmp_path is not)."""

    what = "service"

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"cq-own-{self.what}-"))
        os.chmod(self.root, 0o755)
        self.running = False

    def start(self) -> None:
        raise NotImplementedError

    def stop(self, kill: bool = False) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop the service (if it runs) and remove its directory."""
        try:
            if self.running:
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class OwnKafka(_Own):
    """A single-node KRaft broker on free ports; `bootstrap` is its address."""

    what = "kafka"

    def __init__(self) -> None:
        super().__init__()
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap = f"{kafka.HOST}:{self.port}"

    def start(self) -> None:
        """Start the broker (again: on the same ports, with the same data) and wait until it
        answers."""
        kafka.start(self.root, self.port, self.controller_port, classpath_cache=_CLASSPATH_CACHE)
        self.running = True

    def stop(self, kill: bool = False) -> None:
        """Stop the broker: SIGTERM and wait for it to exit (`kill`: SIGKILL)."""
        kafka.stop(self.root, kill=kill)
        self.running = False

    def log_tail(self, lines: int = 40) -> str:
        return kafka._tail(kafka._Paths(self.root), lines)


class OwnPostgres(_Own):
    """A PostgreSQL server on a free port; `url` is the SQLAlchemy URL of its `cq` database."""

    what = "postgres"

    def __init__(self) -> None:
        super().__init__()
        self.port = free_port()
        self.url = postgres.database_url(self.port)

    def start(self) -> None:
        """Start the server (again: on the same port, with the same data) and wait until the
        `cq` database answers."""
        postgres.start(self.root, self.port)
        self.running = True

    def stop(self, kill: bool = False) -> None:
        """Stop the server (pg_ctl -m fast: connections are cut; `kill`: -m immediate)."""
        postgres.stop(self.root, kill=kill)
        self.running = False
