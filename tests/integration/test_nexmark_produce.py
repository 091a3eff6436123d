"""`cq nexmark produce` against the real broker, and the shipped Kafka variant of the NEXMark
pipeline (pipelines/nexmark/kafka) served by `cq serve` while it produces: what
`make demo-service` runs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from typer.testing import CliRunner

from cq_service.bench.kafka_topics import count, delete_topics, messages
from cq_service.bench.nexmark_produce import rows_before
from cq_service.cli import app
from cq_service.io.nexmark import KINDS, SCHEMAS

ROOT = Path(__file__).resolve().parents[2]
KAFKA_PIPELINE = ROOT / "pipelines" / "nexmark" / "kafka" / "nexmark.yaml"


def test_produce_writes_the_three_topics(kafka_bootstrap: str) -> None:
    prefix = f"h28-{uuid.uuid4().hex[:8]}-"
    topics = [f"{prefix}{k}" for k in KINDS]
    try:
        result = CliRunner().invoke(
            app,
            [
                "nexmark",
                "produce",
                "--rate",
                "4000",
                "--limit",
                "3000",
                "--bursts",
                "off",
                "--topic-prefix",
                prefix,
                "--bootstrap",
                kafka_bootstrap,
                "--quiet",
            ],
        )
        assert result.exit_code == 0, result.output
        assert "produced 3,000 events (person 60, auction 180, bid 2,760)" in result.output
        for kind, topic in zip(KINDS, topics, strict=True):
            got = list(messages(kafka_bootstrap, topic))
            assert len(got) == rows_before(kind, 3000)
            assert all(list(m) == list(SCHEMAS[kind]) for m in got)
            stamps = [m["dateTime"] for m in got]
            assert stamps == sorted(stamps)
        # by --seconds, with a burst: 1 s at 1000/s, then 0.5 s at 3x
        result = CliRunner().invoke(
            app,
            [
                "nexmark",
                "produce",
                "--rate",
                "1000",
                "--seconds",
                "1.5",
                "--bursts",
                "1:1:3",
                "--topic-prefix",
                prefix,
                "--bootstrap",
                kafka_bootstrap,
                "--quiet",
            ],
        )
        assert result.exit_code == 0, result.output
        assert "produced 2,500 events" in result.output
        assert count(kafka_bootstrap, f"{prefix}bid") == 2 * rows_before("bid", 3000) - (
            rows_before("bid", 3000) - rows_before("bid", 2500)
        )
    finally:
        delete_topics(kafka_bootstrap, topics)


def test_the_kafka_pipeline_validates() -> None:
    result = CliRunner().invoke(app, ["validate", str(KAFKA_PIPELINE)])
    assert result.exit_code == 0, result.output
    text = KAFKA_PIPELINE.read_text()
    assert "memory_budget: 256 MiB" in text and "type: generator" not in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


def test_serve_the_kafka_pipeline_while_producing(tmp_path: Path, kafka_bootstrap: str) -> None:
    """The shipped file, its topics renamed for this test, deployed by `cq serve`; results of
    the stateless queries reach their topics while `cq nexmark produce` runs."""
    prefix = f"h28-{uuid.uuid4().hex[:8]}-"
    folder = tmp_path / "pipelines"
    folder.mkdir()
    text = KAFKA_PIPELINE.read_text().replace("topic: nexmark-", f"topic: {prefix}")
    text = text.replace("start: latest", "start: earliest")  # new topics: nothing missed
    text = text.replace(
        "path: ../categories.csv", f"path: {KAFKA_PIPELINE.parent.parent / 'categories.csv'}"
    )
    (folder / "nexmark.yaml").write_text(text)
    env = {**os.environ, "CQ_KAFKA_BOOTSTRAP": kafka_bootstrap, "PYTHONPATH": str(ROOT)}
    created = CliRunner().invoke(
        app, ["nexmark", "topics", str(folder / "nexmark.yaml"), "--bootstrap", kafka_bootstrap]
    )
    assert created.exit_code == 0, created.output
    assert "(of 12 topics)" in created.output
    port = _free_port()
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cq_service.cli",
            "serve",
            "--pipelines",
            str(folder),
            "--catalog",
            f"sqlite:///{tmp_path / 'catalog.db'}",
            "--port",
            str(port),
        ],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline and status != "running":
            assert worker.poll() is None, log.read_text()
            try:
                pipelines = json.loads(_get(port, "/pipelines"))["pipelines"]
                status = next(
                    (
                        "running" if p["rejected"] is None else p["rejected"]
                        for p in pipelines
                        if p["name"] == "nexmark-kafka"
                    ),
                    None,
                )
            except OSError:
                pass
            time.sleep(0.3)
        assert status == "running", log.read_text()
        produced = CliRunner().invoke(
            app,
            [
                "nexmark",
                "produce",
                "--rate",
                "2000",
                "--seconds",
                "2",
                "--topic-prefix",
                prefix,
                "--bootstrap",
                kafka_bootstrap,
                "--quiet",
            ],
        )
        assert produced.exit_code == 0, produced.output
        # q0 and q1 pass every bid on once time has passed it: all but the last millisecond's
        stamps = [m["dateTime"] for m in messages(kafka_bootstrap, f"{prefix}bid")]
        assert len(stamps) == rows_before("bid", 4000)
        bids = sum(s < max(stamps) for s in stamps)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and count(kafka_bootstrap, f"{prefix}q0") < bids:
            time.sleep(0.5)
        assert count(kafka_bootstrap, f"{prefix}q0") == bids, log.read_text()
        assert count(kafka_bootstrap, f"{prefix}q1") == bids
        assert "nexmark-kafka" in _get(port, "/ui") or "<html" in _get(port, "/ui").lower()
    finally:
        worker.terminate()
        worker.wait(30)
        delete_topics(
            kafka_bootstrap, [f"{prefix}{n}" for n in [*KINDS, *(f"q{i}" for i in range(9))]]
        )
