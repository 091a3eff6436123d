"""Restart time against the age of a deployment: state snapshots against replay.

For each query — a `[Rows N]` window, an unbounded aggregate, a join with a relation read from
Kafka: the three whose horizon is the whole history (docs/service.md, "Delivery") — and each
history length H (stream records already in the topic), on a real broker:

1. a worker (`cq serve`) reads the H records and stops cleanly (SIGTERM: a last checkpoint and
   a last snapshot); its catalog is copied as it stands — the checkpoint a worker that never
   took a snapshot would have left too: every source replayed from its first offset;
2. **snapshot**: the worker starts again on its catalog and snapshot folder;
3. **replay**: the worker starts again on the copy, with snapshots off.

Restart time is the wall clock from launching the process until every source has caught up
with the end of its topic (`cq_source_lag` 0 on /metrics, polled every 50 ms), so it includes
the interpreter's start-up, the catalog, and the snapshot's load or the history's replay. Also
reported: the records the restarted process read (`cq_source_elements_total`), the snapshot
file's size and how long the last snapshot held the engine thread.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cq_service.io.kafka_client import API_VERSION
from cq_service.service.metrics import parse_metrics

__all__ = ["QUERIES", "RestartResult", "report", "run_benchmark"]

QUERIES = {
    "rows": "SELECT k, SUM(v) AS total FROM S [Rows 1000] GROUP BY k",
    "unbounded": "SELECT k, COUNT(*) AS n, MAX(v) AS top FROM S GROUP BY k",
    "relation": "SELECT Istream(S.k, S.v, R.label) FROM S [Range 100], R WHERE S.k = R.k",
}
KEYS = 1000  # distinct k
R_EVERY = 100  # one relation update (a delete and an insert) per this many stream records


@dataclass
class RestartResult:
    query: str
    history: int  # stream records in the topic
    mode: str  # snapshot | replay
    seconds: float  # launch -> caught up
    read_again: int  # records the restarted process read
    snapshot_bytes: int | None  # of the snapshot the first run left
    snapshot_seconds: float | None  # how long its last snapshot held the engine thread


def run_benchmark(
    bootstrap: str,
    histories: list[int],
    work: Path,
    replay_max: int | None = None,
    on_result: Callable[[RestartResult], None] | None = None,
) -> list[RestartResult]:
    """Every query at every history length (cumulative: the topics grow), from its snapshot
    and — up to `replay_max` records, or always — by replay; `on_result` sees each result as
    it is measured."""
    from kafka import KafkaAdminClient

    work = work.resolve()  # each worker runs in its own folder: paths given to it are absolute
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=API_VERSION)
    s_topic, r_topic = (f"cq-bench-restart-{uuid.uuid4().hex[:8]}-{n}" for n in "sr")
    admin.create_topics({t: {"num_partitions": 1, "replication_factor": 1}
                         for t in (s_topic, r_topic)})
    results: list[RestartResult] = []
    try:
        produced = 0
        for history in sorted(histories):
            _produce(bootstrap, s_topic, r_topic, produced, history)
            produced = history
            for query in QUERIES:
                replay = replay_max is None or history <= replay_max
                for result in _measure(bootstrap, s_topic, r_topic, query, history, work, replay):
                    results.append(result)
                    if on_result is not None:
                        on_result(result)
    finally:
        admin.delete_topics([s_topic, r_topic])
        admin.close()
    return results


def report(results: list[RestartResult]) -> str:
    """A markdown table: restart seconds by query and history, both modes."""
    import os
    import platform

    lines = [
        "# Restart time against the age of a deployment",
        "",
        f"`cq bench restart`, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, one run per cell. Seconds from launching "
        "`cq serve` until every source has caught up with its topic's end; records read "
        "again by the restarted process.",
        "",
        "| query | history | snapshot restart | replay restart | read again (snapshot / "
        "replay) | snapshot file | last snapshot held the engine |",
        "|---|---|---|---|---|---|---|",
    ]
    cells = {(r.query, r.history, r.mode): r for r in results}
    for query in QUERIES:
        for history in sorted({r.history for r in results}):
            snap, replay = cells.get((query, history, "snapshot")), cells.get(
                (query, history, "replay"))
            if snap is None:
                continue
            size = "—" if snap.snapshot_bytes is None else f"{snap.snapshot_bytes / 2**20:.1f} MiB"
            held = "—" if snap.snapshot_seconds is None else f"{snap.snapshot_seconds:.2f} s"
            replayed = "not measured" if replay is None else f"{replay.seconds:.1f} s"
            read_again = "—" if replay is None else f"{replay.read_again:,}"
            lines.append(
                f"| {query} | {history:,} | {snap.seconds:.1f} s | {replayed} | "
                f"{snap.read_again:,} / {read_again} | {size} | {held} |"
            )
    return "\n".join(lines) + "\n"


def _measure(bootstrap: str, s_topic: str, r_topic: str, query: str, history: int,
             work: Path, replay: bool = True) -> Iterator[RestartResult]:
    folder = work / f"{query}-{history}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "pipelines").mkdir(parents=True)
    (folder / "pipelines" / "p.yaml").write_text(_pipeline(s_topic, r_topic, query))
    first = _Serve(folder, bootstrap, "catalog.db", snapshots=True)
    first.wait_caught_up()
    first.stop()
    shutil.copy(folder / "catalog.db", folder / "replay.db")
    snaps = sorted((folder / "snapshots").rglob("snapshot-*.cqs"))
    size = snaps[-1].stat().st_size if snaps else None
    log = (folder / "worker.log").read_text().splitlines()
    written = [line for line in log if " written in " in line and "snapshot " in line]
    held = float(written[-1].rsplit(" in ", 1)[1].split()[0]) if written else None
    for mode, catalog in (("snapshot", "catalog.db"), ("replay", "replay.db"))[: 2 if replay else 1]:
        serve = _Serve(folder, bootstrap, catalog, snapshots=mode == "snapshot")
        seconds = serve.wait_caught_up()
        read = int(sum(v for k, v in serve.metrics().items()
                       if k.startswith("cq_source_elements_total{")))
        serve.stop()
        print(f"  {query:9s} H={history:>10,} {mode:8s} {seconds:8.2f} s, read {read:,}",
              flush=True)
        yield RestartResult(query, history, mode, seconds, read, size, held)


def _pipeline(s_topic: str, r_topic: str, query: str) -> str:
    source = "{{type: kafka, topic: {}, start: earliest, idle_timeout: 1000000000}}"
    return "\n".join([
        "version: 1", f"name: restart-{query}", "time_unit: ms",
        "streams:", "  S:", "    schema: {k: int, v: int, ts: int}", "    timestamp: ts",
        f"    source: {source.format(s_topic)}",
        "relations:", "  R:", "    schema: {k: int, label: string}", "    timestamp: ts",
        f"    source: {source.format(r_topic)}",
        "queries:", f"  {query}:", f"    cql: {json.dumps(QUERIES[query])}",
        f"    sink: {{type: file, path: out/{query}.jsonl}}", "",
    ])


def _produce(bootstrap: str, s_topic: str, r_topic: str, start: int, end: int) -> None:
    """Stream records start..end-1 (ts 10 i + jitter) and their relation updates."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=API_VERSION,
                             linger_ms=20, batch_size=1 << 20, acks=1)
    rnd = random.Random(start)
    if start == 0:
        for k in range(KEYS):
            producer.send(r_topic, json.dumps({"k": k, "label": "L0", "ts": 0}).encode())
    for i in range(start, end):
        ts = 10 * i + rnd.randrange(10)
        k = rnd.randrange(KEYS)
        producer.send(s_topic, b'{"k": %d, "v": %d, "ts": %d}' % (k, rnd.randrange(1000), ts))
        if i % R_EVERY == 0 and i:
            key, old = (i // R_EVERY) % KEYS, i // R_EVERY // KEYS
            for op, label in (("-", old), ("+", old + 1)):
                producer.send(r_topic, json.dumps(
                    {"k": key, "label": f"L{label}", "ts": ts, "_op": op}).encode())
    producer.flush()
    producer.close()


class _Serve:
    """`cq serve` on one pipeline folder, its API on a free port."""

    def __init__(self, folder: Path, bootstrap: str, catalog: str, snapshots: bool):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        env = {
            "PATH": "/usr/bin:/bin", "HOME": str(Path.home()),
            "CQ_KAFKA_BOOTSTRAP": bootstrap, "CQ_MANAGE_INTERVAL": "0",
            # one snapshot only: at the clean stop
            "CQ_SNAPSHOT_INTERVAL": "1000000" if snapshots else "0",
            "CQ_SNAPSHOTS": str(folder / "snapshots"),
        }
        self.started = time.monotonic()
        log = (folder / "worker.log").open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cq_service.cli", "serve", "--pipelines",
             str(folder / "pipelines"), "--catalog", f"sqlite:///{folder / catalog}",
             "--port", str(self.port), "--name", "restart"],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=folder,
        )

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30) as r:
            return parse_metrics(r.read().decode())

    def wait_caught_up(self, timeout: float = 7200) -> float:
        """Seconds from launch until every source's lag is 0."""
        deadline = self.started + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the worker exited ({self.proc.returncode})")
            try:
                m = self.metrics()
            except (OSError, urllib.error.URLError):
                time.sleep(0.05)
                continue
            lags = [v for k, v in m.items() if k.startswith("cq_source_lag{")]
            elements = [v for k, v in m.items() if k.startswith("cq_source_elements_total{")]
            if lags and not any(lags) and len(elements) == len(lags):
                return time.monotonic() - self.started
            time.sleep(0.05)
        raise TimeoutError("the worker did not catch up")

    def stop(self) -> None:
        """SIGTERM: a clean stop (with a last snapshot when snapshots are on)."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(3600)
