"""A `cq serve` process that dies and comes back, fed from the real broker, and the check of
what its sink topics hold (tests/integration/test_crash_loop.py, test_worker_snapshots.py).

The feed writes a stream S and a relation R (its updates interleaved with S in time) in
timestamp order; the worker runs a pipeline of given queries over them, each to a sink topic
of its own. After each death the test records each sink topic's end offset and the frontier the
catalog holds for each query, and those of the snapshot the next life will restore from
(`Death`); `check_sink` then shows the topic is exactly the uninterrupted run's output (`cq run`
over the same records from files) plus only the duplicates docs/service.md allows: split at the
recorded end offsets, each life's output is a contiguous piece of the reference, and the next
life starts exactly at the first result after the frontier it resumes from (`resumes_after`):
the last checkpoint's, or the snapshot's when that is later.
"""

from __future__ import annotations

import bisect
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import OffsetSpec
from kafka.structs import TopicPartition

from cq_service.catalog import Catalog
from cq_service.service.config import ServiceConfig
from cq_service.service.metrics import parse_metrics
from cq_service.service.snapshots import SnapshotStore
from tests.integration.worker_process import WorkerProcess
from tests.services.kafka import KAFKA_API_VERSION

NAME = "crash"
WORKER = "crash-worker"
RATE = 150  # S records per second (R gets one update per 10 S records)
FLUSH = 10**9  # the last records' timestamp: completes every earlier instant
ENGINE_SEED = 2026


# -- the data ----------------------------------------------------------------------------------


def s_record(i: int, rnd: random.Random) -> dict:
    return {"k": rnd.randrange(10), "v": rnd.randrange(100), "ts": 10 * i + rnd.randrange(10)}


def r_updates(i: int, ts: int) -> list[dict]:
    """Relation R: key i % 10 changes its label (delete the old one, insert the new one)."""
    k = (i // 10) % 10
    old = f"L{k}" if i < 100 else f"L{i - 100}"
    return [{"k": k, "label": old, "ts": ts, "_op": "-"},
            {"k": k, "label": f"L{i}", "ts": ts, "_op": "+"}]


def initial_r() -> list[dict]:
    return [{"k": k, "label": f"L{k}", "ts": 0, "_op": "+"} for k in range(10)]


class Feed:
    """Writes S and R to their topics at RATE, in timestamp order, until stopped; keeps what it
    wrote for the reference run."""

    def __init__(self, bootstrap: str, s_topic: str, r_topic: str):
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION,
                                      acks="all", linger_ms=5)
        self.topics = (s_topic, r_topic)
        self.s: list[dict] = []
        self.r: list[dict] = initial_r()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._rnd = random.Random(ENGINE_SEED)

    def start(self) -> None:
        for rec in self.r:
            self._send(self.topics[1], rec)
        self.producer.flush()
        self._thread.start()

    def _send(self, topic: str, rec: dict) -> None:
        self.producer.send(topic, json.dumps(rec).encode(), partition=0)

    def _run(self) -> None:
        i = 0
        began = time.monotonic()
        while not self._stop.is_set():
            due = began + i / RATE
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            rec = s_record(i, self._rnd)
            self.s.append(rec)
            self._send(self.topics[0], rec)
            if i % 10 == 0 and i > 0:
                for u in r_updates(i, rec["ts"]):
                    self.r.append(u)
                    self._send(self.topics[1], u)
            i += 1

    def finish(self) -> None:
        """Stop, then write the last records, which complete every earlier instant."""
        self._stop.set()
        self._thread.join()
        last_s = {"k": 0, "v": 0, "ts": FLUSH}
        last_r = {"k": 99, "label": "end", "ts": FLUSH, "_op": "+"}
        self.s.append(last_s)
        self.r.append(last_r)
        self._send(self.topics[0], last_s)
        self._send(self.topics[1], last_r)
        self.producer.flush()
        self.producer.close()


# -- the pipeline and the reference -------------------------------------------------------------


def pipeline_yaml(
    s_source: str, r_source: str, sinks: dict[str, str], queries: dict[str, str]
) -> str:
    lines = [
        "version: 1", f"name: {NAME}", "time_unit: ms",
        "streams:", "  S:", "    schema: {k: int, v: int, ts: int}", "    timestamp: ts",
        f"    source: {s_source}",
        "relations:", "  R:", "    schema: {k: int, label: string}", "    timestamp: ts",
        f"    source: {r_source}",
        "queries:",
    ]
    for name, cql in queries.items():
        lines += [f"  {name}:", f"    cql: {json.dumps(cql)}", f"    sink: {sinks[name]}"]
    return "\n".join(lines) + "\n"


def kafka_pipeline(
    s_topic: str, r_topic: str, sinks: dict[str, str], queries: dict[str, str]
) -> str:
    # No partition ever turns idle: time moves with the records only, so the results do not
    # depend on when the worker happened to be down.
    source = "{{type: kafka, topic: {}, start: earliest, idle_timeout: 1000000000}}"
    return pipeline_yaml(
        source.format(s_topic), source.format(r_topic),
        {q: f"{{type: kafka, topic: {t}}}" for q, t in sinks.items()}, queries,
    )


Element = tuple[int, str, tuple]


def reference(
    folder: Path, s: list[dict], r: list[dict], queries: dict[str, str]
) -> dict[str, list[Element]]:
    """`cq run` over the same records from files: the uninterrupted output, in sink order."""
    folder.mkdir()
    (folder / "s.jsonl").write_text("".join(json.dumps(x) + "\n" for x in s))
    (folder / "r.jsonl").write_text("".join(json.dumps(x) + "\n" for x in r))
    text = pipeline_yaml(
        "{type: file, path: s.jsonl}", "{type: file, path: r.jsonl}",
        {q: f"{{type: file, path: out/{q}.jsonl}}" for q in queries}, queries,
    )
    (folder / "pipeline.yaml").write_text(text)
    subprocess.run([sys.executable, "-m", "cq_service.cli", "run", str(folder / "pipeline.yaml")],
                   check=True, capture_output=True)
    return {q: [e for e in map(_element, (folder / "out" / f"{q}.jsonl").read_text().splitlines())
                if e[0] < FLUSH] for q in queries}


def _element(line: str | bytes) -> Element:
    obj = json.loads(line)
    ts, op = obj.pop("_ts"), obj.pop("_op")
    return (ts, op, tuple(obj.values()))


# -- the worker ---------------------------------------------------------------------------------


@dataclass
class Death:
    life: int
    by: str  # "outside" or the failpoint setting
    ends: dict[str, int]  # sink query -> the topic's end offset after the death
    frontiers: dict[str, int | None]  # query -> the catalog's frontier (None: no checkpoint)
    # query -> its frontier in the newest usable snapshot, at the catalog's version (None: the
    # snapshot does not hold it so); what the next life restores from (restore.py)
    snapshot: dict[str, int | None] = field(default_factory=dict)

    def resumes_after(self, query: str) -> int | None:
        """The frontier the next life's output of `query` starts after (None: from the start).

        The checkpoint's, unless the query comes back from a snapshot with a later one: a kill
        after a checkpoint wrote its snapshot and before the catalog recorded it leaves the
        snapshot ahead. Every result up to the snapshot's frontier was acknowledged before it
        was written, and the restored engine computes none of them again (the deployer's
        `_restore_group` resumes after the later of the two)."""
        frontier, snap = self.frontiers[query], self.snapshot.get(query)
        if frontier is None or snap is None:  # no checkpoint (it starts afresh), or no snapshot
            return frontier
        return max(frontier, snap)


@dataclass
class Lives(WorkerProcess):
    folder: Path
    catalog: str
    bootstrap: str
    port: int
    proc: subprocess.Popen | None = None
    log: list[str] = field(default_factory=list)
    stop_wait: float = 30

    def start(self, failpoints: str = "", snapshot_interval: float = 0.3) -> None:
        env = {**os.environ, "CQ_KAFKA_BOOTSTRAP": self.bootstrap, "CQ_TOKEN": "t",
               "CQ_CHECKPOINT_INTERVAL": "0.2", "CQ_RECONCILE_INTERVAL": "0.2",
               "CQ_MANAGE_INTERVAL": "0", "CQ_SNAPSHOT_INTERVAL": str(snapshot_interval),
               "CQ_FAILPOINTS": failpoints}
        args = [sys.executable, "-m", "cq_service.cli", "serve", "--pipelines",
                str(self.folder / "pipelines"), "--catalog", self.catalog,
                "--port", str(self.port), "--name", WORKER]
        log = (self.folder / "worker.log").open("a")
        log.write(f"\n==== life (failpoints {failpoints or 'none'})\n")
        log.flush()
        self.proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)

    def ready(self, timeout: float = 60) -> bool:
        """Wait until /readyz answers 200 (True) or the process is gone (False)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("the worker did not become ready:\n" + self.tail())

    def died_by_itself(self, timeout: float) -> bool:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout) == -signal.SIGKILL
        except subprocess.TimeoutExpired:
            return False

    def metrics(self) -> dict[str, float]:
        """/metrics as {name{labels}: value}."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            return parse_metrics(r.read().decode())

    def log_count(self, text: str) -> int:
        """Lines of the worker's log (every life) that hold `text`."""
        return sum(text in line for line in (self.folder / "worker.log").open())

    def tail(self) -> str:
        return "\n".join((self.folder / "worker.log").read_text().splitlines()[-40:])


def end_offsets(admin: KafkaAdminClient, sinks: dict[str, str]) -> dict[str, int]:
    """Each sink topic's end offset, once it has stopped moving (a dead worker's last sends
    may still be on their way)."""
    def read() -> dict[str, int]:
        got = admin.list_partition_offsets(
            {TopicPartition(t, 0): OffsetSpec.LATEST for t in sinks.values()}
        )
        return {q: got[TopicPartition(t, 0)].offset for q, t in sinks.items()}

    before = read()
    while True:
        time.sleep(0.3)
        now = read()
        if now == before:
            return now
        before = now


def frontiers(catalog: str, queries: dict[str, str]) -> dict[str, int | None]:
    saved = Catalog(catalog).load_checkpoint(WORKER)
    done = (saved.queries or {}) if saved else {}
    return {q: (int(done[f"{NAME}/{q}"]["frontier"]) if f"{NAME}/{q}" in done else None)
            for q in queries}


def snapshot_frontiers(catalog: str, queries: dict[str, str]) -> dict[str, int | None]:
    """Each query's frontier in the snapshot a worker started now would restore from (the
    newest usable one), if it holds the query at the version the catalog's checkpoint has."""
    folder = ServiceConfig(catalog=catalog, name=WORKER).snapshot_folder
    found = SnapshotStore(folder).latest()
    saved = Catalog(catalog).load_checkpoint(WORKER)
    versions = {k: d.get("version") for k, d in ((saved.queries or {}) if saved else {}).items()}
    held = found[1]["queries"] if found is not None else {}
    out: dict[str, int | None] = {}
    for q in queries:
        data = held.get(f"{NAME}/{q}")
        same = data is not None and data["version"] == versions.get(f"{NAME}/{q}")
        out[q] = int(data["frontier"]) if same else None
    return out


def record_death(
    life: int, by: str, lives: Lives, admin: KafkaAdminClient, sinks: dict[str, str],
    queries: dict[str, str],
) -> Death:
    """What a dead worker left: its sinks' end offsets, the catalog's frontiers and those of
    the snapshot the next life restores from."""
    return Death(life, by, end_offsets(admin, sinks), frontiers(lives.catalog, queries),
                 snapshot_frontiers(lives.catalog, queries))


def read_topic(bootstrap: str, topic: str, count: int) -> list[Element]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=2000)
    consumer.assign([TopicPartition(topic, 0)])
    out: list[Element] = []
    while len(out) < count:
        batch = [_element(m.value) for m in consumer]
        if not batch:
            break
        out.extend(batch)
    consumer.close()
    return out


# -- the check ----------------------------------------------------------------------------------


def check_sink(query: str, got: list[Element], expected: list[Element], deaths: list[Death]) -> int:
    """`got` is `expected` with only the allowed duplicates (module docstring); returns how
    many results were delivered twice."""
    times = [e[0] for e in expected]
    pos = 0  # where in `expected` the current life's output starts
    start = 0  # where in `got` it starts
    repeated = 0
    for death in deaths:
        piece = got[start:death.ends[query]]
        assert piece == expected[pos:pos + len(piece)], _mismatch(
            f"{query}: life {death.life}", piece, expected, pos
        )
        end = pos + len(piece)
        frontier = death.resumes_after(query)
        resume = 0 if frontier is None else bisect.bisect_right(times, frontier)
        assert resume <= end, (
            f"{query}: after life {death.life} the restart resumes at result #{resume} "
            f"(frontier {frontier}) but only {end} were delivered: {resume - end} lost"
        )
        repeated += end - resume
        pos, start = resume, death.ends[query]
    last = [e for e in got[start:] if e[0] < FLUSH]
    assert last == expected[pos:], (
        f"{query}: the last life wrote {len(last)} results, {len(expected) - pos} expected from "
        f"#{pos}"
    )
    return repeated


def _mismatch(who: str, piece: list[Element], expected: list[Element], pos: int) -> str:
    """Why `piece` is not the next results from #`pos`: where it first differs, and what."""
    want = expected[pos:pos + len(piece)]
    i = next((i for i, (a, b) in enumerate(zip(piece, want)) if a != b), min(len(piece), len(want)))
    return (f"{who} wrote something other than the next {len(piece)} results from #{pos}: "
            f"its #{i} is {piece[i] if i < len(piece) else 'missing'}, expected "
            f"#{pos + i} {want[i] if i < len(want) else '(past the end)'}")


def check_done(got: list[Element], expected: list[Element]) -> bool:
    """The sink has reached the end of the reference (its last element is there)."""
    return bool(expected) and any(e == expected[-1] for e in got[-len(expected):])
