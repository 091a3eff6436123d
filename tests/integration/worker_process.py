"""`cq serve` as a process of its own on a free port (so it can be killed for real), shared by
the worker tests on the real broker (tests/integration/test_worker_kafka.py,
test_worker_outages.py, test_backfill_handover.py) and by tests/containers/stack.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WorkerProcess:
    """What every handle on a `cq serve` process does: kill it for real, or stop it (SIGTERM,
    then SIGKILL after `stop_wait` seconds)."""

    proc: subprocess.Popen | None
    stop_wait: float = 20

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.stop_wait)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Worker(WorkerProcess):
    """`cq serve` as a separate process (so it can be killed for real)."""

    def __init__(self, folder: Path, catalog: str, bootstrap: str, port: int):
        self.args = [sys.executable, "-m", "cq_service.cli", "serve", "--pipelines", str(folder / "pipelines"),
                     "--catalog", catalog, "--port", str(port), "--name", "e2e"]
        self.env = {**os.environ, "CQ_KAFKA_BOOTSTRAP": bootstrap, "CQ_TOKEN": "t",
                    "CQ_CHECKPOINT_INTERVAL": "0.2", "CQ_RECONCILE_INTERVAL": "0.3"}
        self.log = folder / "worker.log"
        self.port = port
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.args, env=self.env, stdout=self.log.open("a"), stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("the worker did not become ready:\n" + self.log.read_text())

    def get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
            return r.read().decode()
