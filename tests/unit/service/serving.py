"""A worker running in its own thread, with a test client for its HTTP API."""

from __future__ import annotations

import shutil
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from fastapi.testclient import TestClient

from cq_service.service.api import make_app
from cq_service.service.worker import Worker
from tests.unit.service.workers import EXAMPLE, sqlite_worker


@contextmanager
def serving_example(
    tmp_path: Path, token: str, reconcile_interval: float
) -> Iterator[tuple[TestClient, Worker, Path]]:
    """A worker on a copy of the web-proxy example (folder `tmp_path/p`, SQLite catalog beside
    it), serving: (its API's test client, the worker, the pipelines folder)."""
    folder = tmp_path / "p"
    shutil.copytree(EXAMPLE, folder / "web-proxy", ignore=shutil.ignore_patterns("out"))
    worker = sqlite_worker(tmp_path, folder, token=token, checkpoint_interval=0.1,
                           reconcile_interval=reconcile_interval)
    with serving(worker) as api:
        yield api, worker, folder


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


@contextmanager
def serving_http(worker: Worker, ready_within: float = 30.0) -> Iterator[str]:
    """Run `worker` and its API on 127.0.0.1 (uvicorn, in a thread) until the block ends;
    yields the API's base URL once /readyz answers 200 (or after `ready_within` seconds)."""
    engine = threading.Thread(target=worker.run, daemon=True)
    engine.start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(make_app(worker), host="127.0.0.1", port=port, log_level="warning")
    )
    api = threading.Thread(target=server.run, daemon=True)
    api.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + ready_within
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:  # not listening yet, or 503 while starting
            pass
        time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        api.join(10)
        worker.stop()
        engine.join(10)
