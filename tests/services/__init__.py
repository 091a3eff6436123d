"""Real services for development and integration tests: `python -m tests.services up|down|status`.

`up()` starts, idempotently and under a file lock (safe for parallel pytest workers), a
single-node Kafka broker (tests/services/kafka.py) and a PostgreSQL server
(tests/services/postgres.py) on 127.0.0.1, with their state in `.services/` at the top of the
checkout, and writes their addresses to `.services/env`.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.services import kafka, postgres

__all__ = ["ENV_FILE", "STATE_DIR", "Services", "down", "status", "up"]

STATE_DIR = Path(__file__).resolve().parents[2] / ".services"
ENV_FILE = STATE_DIR / "env"
_LOCK_FILE = STATE_DIR / "lock"


@dataclass(frozen=True)
class Services:
    """Where the running services answer."""

    kafka_bootstrap: str
    database_url: str

    def env(self) -> dict[str, str]:
        """The environment variables the integration tests read."""
        return {"CQ_TEST_KAFKA": self.kafka_bootstrap, "CQ_TEST_DATABASE_URL": self.database_url}


def up() -> Services:
    """Start whichever service does not answer yet, wait for both, and record their addresses."""
    with _locked():
        with ThreadPoolExecutor(max_workers=2) as pool:
            bootstrap = pool.submit(kafka.start, STATE_DIR / "kafka")
            database_url = pool.submit(postgres.start, STATE_DIR / "postgres")
            services = Services(bootstrap.result(), database_url.result())
        lines = [f"{name}={value}\n" for name, value in services.env().items()]
        ENV_FILE.write_text("".join(lines))
        return services


def down() -> dict[str, bool]:
    """Stop both services (their caches and data stay); which ones were running."""
    with _locked():
        return {"kafka": kafka.stop(STATE_DIR / "kafka"),
                "postgresql": postgres.stop(STATE_DIR / "postgres")}


def status() -> dict[str, bool]:
    """Whether each service answers now."""
    return {"kafka": kafka.answers(), "postgresql": postgres.answers()}


@contextmanager
def _locked() -> Iterator[None]:
    """Hold an exclusive lock on `.services/lock` (concurrent `up`/`down` callers queue)."""
    STATE_DIR.mkdir(exist_ok=True)
    with _LOCK_FILE.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
