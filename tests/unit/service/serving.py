"""A worker running in its own thread, with a test client for its HTTP API."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi.testclient import TestClient

from cq_service.service.api import make_app
from cq_service.service.worker import Worker


@contextmanager
def serving(worker: Worker, ready_within: float = 20.0) -> Iterator[TestClient]:
    """Run `worker` until the block ends; the block starts once it is ready (or after
    `ready_within` seconds, when the test's own assertions will say what went wrong)."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + ready_within
    while not worker.ready and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield TestClient(make_app(worker))
    finally:
        worker.stop()
        thread.join(10)
