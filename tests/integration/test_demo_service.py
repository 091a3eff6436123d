"""`make demo-service` on the real broker (the services already up: DEMO_SERVICES=): the topics,
the worker serving pipelines/nexmark/kafka with its budget, `cq nexmark produce` feeding it,
the /ui address printed; Ctrl-C (SIGINT to the process group, as a terminal sends it) stops it
all."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from cq_service.bench.kafka_topics import count

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group(pgid: int) -> list[str]:
    ps = subprocess.run(["ps", "-o", "pid=", "-g", str(pgid)], capture_output=True, text=True)
    return ps.stdout.split()


def test_make_demo_service(kafka_bootstrap: str) -> None:
    port = _free_port()
    args = [
        "make",
        "-C",
        str(ROOT),
        "--no-print-directory",
        "demo-service",
        "DEMO_SERVICES=",
        f"DEMO_PORT={port}",
        f"DEMO_KAFKA={kafka_bootstrap}",
        "DEMO_RATE=500",
    ]
    dry = subprocess.run([*args[:4], "-n", *args[4:]], capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    for piece in (
        "nexmark topics pipelines/nexmark/kafka/nexmark.yaml",
        "serve --pipelines pipelines/nexmark/kafka",
        "nexmark produce --rate 500",
        "trap ",
    ):
        assert piece in dry.stdout
    q0 = count(kafka_bootstrap, "nexmark-q0") if _exists(kafka_bootstrap) else 0
    demo = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal
    )
    try:
        assert demo.stdout is not None
        lines = []
        while not any("web view" in line for line in lines):
            line = demo.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        assert f"web view: http://127.0.0.1:{port}/ui/ (API token demo)" in lines[-1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ui/", timeout=10) as r:
            assert r.status == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/pipelines", timeout=10) as r:
            (pipeline,) = json.loads(r.read())["pipelines"]
        assert pipeline["name"] == "nexmark-kafka" and pipeline["rejected"] is None
        assert pipeline["budget"]["memory_budget"] == 256 * 2**20
        deadline = time.monotonic() + 60
        while count(kafka_bootstrap, "nexmark-q0") <= q0:
            assert time.monotonic() < deadline, "no results on nexmark-q0"
            time.sleep(0.5)
    finally:
        os.killpg(demo.pid, signal.SIGINT)
        demo.wait(60)
    time.sleep(1)
    assert _group(demo.pid) == []


def _exists(bootstrap: str) -> bool:
    from cq_service.bench.kafka_topics import topics_present

    return "nexmark-q0" in topics_present(bootstrap)
