"""The worker when a sink's broker cannot be reached (nothing listens on its port): it keeps
running, keeps every result, pauses its sources once the sinks hold `sink_buffer_bytes`, records
no checkpoint, says why through readiness — and stops cleanly. (With a real broker going away
and coming back: tests/integration/test_worker_outages.py.)"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

from cq_service.engine.operators.base import NEVER
from cq_service.service.config import ServiceConfig, load_config
from cq_service.service.worker import Worker
from tests.unit.service.workers import sqlite_worker

RECORDS = 5_000


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_worker(tmp_path: Path, port: int) -> Worker:
    folder = tmp_path / "p"
    folder.mkdir()
    rows = (json.dumps({"k": i % 7, "ts": i}) + "\n" for i in range(RECORDS))
    (folder / "s.jsonl").write_text("".join(rows))
    (folder / "p.yaml").write_text(
        "version: 1\nname: p\ntime_unit: ms\nstreams:\n  S:\n"
        "    schema: {k: int, ts: int}\n    timestamp: ts\n"
        "    source: {type: file, path: s.jsonl}\n"
        "queries:\n  q:\n    cql: SELECT * FROM S\n"
        f"    sink: {{type: kafka, topic: out, bootstrap_servers: '127.0.0.1:{port}'}}\n"
    )
    return sqlite_worker(
        tmp_path, folder, batch_rows=100, manage_interval=0, flush_timeout=0.2,
        retry_backoff=0.05, retry_backoff_max=0.1, sink_buffer_bytes=20_000,
    )  # fmt: skip


def test_a_sink_without_its_broker_holds_every_result_and_pauses_the_sources(
    tmp_path: Path,
) -> None:
    port = closed_port()
    worker = make_worker(tmp_path, port)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            postponed = worker.checkpointer.postponed is not None
            if worker.paused and postponed and worker.dependencies.reasons():
                break
            time.sleep(0.05)

        def look() -> tuple[int, int, int, int]:
            sink = worker.engine.sinks["p/q"]
            [source] = worker.engine.executor.sources
            return source.rows_in, sink.written, sink.writer.pending[0], worker.buffered_bytes()

        read, written, pending, buffered = worker.call(look)
        assert worker.paused
        assert 0 < read < RECORDS  # paused before the end of the file
        assert written > 0 and pending == written  # every result kept, none acknowledged
        assert buffered > worker.config.sink_buffer_bytes // 2
        time.sleep(0.5)
        assert worker.call(look)[0] == read  # nothing more is read while paused
        saved = worker.catalog.load_checkpoint("worker")  # the one written when deploying
        assert saved is not None and saved.queries["p/q"]["frontier"] == NEVER  # nothing since
        postponed = worker.checkpointer.postponed
        assert postponed is not None
        assert (postponed.dependency, postponed.role, postponed.reason) == (
            f"kafka 127.0.0.1:{port}", "sink topic out", "connection refused"
        )
        [reason] = worker.dependencies.reasons()
        assert reason.startswith(f"kafka 127.0.0.1:{port}: sink topic out: connection refused")
        state = worker.dependencies.states()[f"kafka 127.0.0.1:{port}"]
        assert not state.up and state.outages == 1 and state.retries >= 1
        assert thread.is_alive()
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()  # stopped cleanly, without its broker


def test_the_outage_settings_are_read_and_checked() -> None:
    config = load_config(environ={
        "CQ_FLUSH_TIMEOUT": "3", "CQ_SINK_BUFFER_BYTES": "1000", "CQ_RETRY_BACKOFF": "0.1",
        "CQ_RETRY_BACKOFF_MAX": "4", "CQ_CATALOG_TIMEOUT": "5",
    })
    assert (config.flush_timeout, config.sink_buffer_bytes, config.retry_backoff,
            config.retry_backoff_max, config.catalog_timeout) == (3.0, 1000, 0.1, 4.0, 5.0)
    for bad, message in [
        ({"flush_timeout": 0}, "flush_timeout: 0 is not positive"),
        ({"retry_backoff": 2.0, "retry_backoff_max": 1.0}, "retry_backoff_max: 1.0 is below"),
        ({"sink_buffer_bytes": 0}, "sink_buffer_bytes: 0 is not positive"),
    ]:
        try:
            ServiceConfig(**bad)
        except ValueError as e:
            assert message in str(e)
        else:
            raise AssertionError(f"{bad} was accepted")
