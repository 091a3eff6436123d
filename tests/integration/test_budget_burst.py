"""A memory budget holds through a 10× burst on the real broker, with nothing lost.

A producer writes S to a Kafka topic in real time: BASE records a second, then ten times that
for BURST_S seconds, then BASE again; each record's timestamp is its place in that schedule.
The worker runs `SELECT k, COUNT(*), SUM(v) FROM S [Range 10 Seconds] GROUP BY k` with
`qos: {window: [500, 10000]}` under a budget the burst does not fit at the full window
(checked from the data itself). The keeper's measured figure, sampled at every turn of the
worker's loop, never passes the budget; nothing is shed; the topic's lag is drained after the
burst; /metrics' call to the engine thread is answered within a second throughout; and the
results are exactly those of `cq run` over the same records replaying the worker's adjustment
log (the settings in force).

Two ways: live (the producer keeps to the schedule while the worker reads) and catching up
(every record is in the topic before the worker starts, so it reads as fast as the budget
lets it: the pacing of the source holds the burst back while the windows shrink).
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from cq_service.catalog import Catalog
from cq_service.compiler import load_and_compile
from cq_service.runner import run_pipeline
from cq_service.service import views
from cq_service.service.adjusting import logged_adjustment
from cq_service.service.config import ServiceConfig
from cq_service.service.worker import Worker
from tests.services.kafka import KAFKA_API_VERSION

NAME = "bursts"
BASE = 400  # records a second before and after the burst
BURST_S = 3.0
BEFORE_S, AFTER_S = 12.0, 8.0
FLUSH = 10**9  # the last record's timestamp: completes every earlier instant
BUDGET = 448 * 1024
FIRST_FILL_BUDGET = 96 * 1024
WINDOW = 10_000  # ms
CQL = f"SELECT k, COUNT(*) AS n, SUM(v) AS total FROM S [Range {WINDOW}] GROUP BY k"


def schedule(factor: int = 10, seed: int = 20) -> list[dict]:
    """Records in timestamp order (ms from 0): Poisson arrivals at BASE, factor × BASE,
    BASE."""
    rnd = random.Random(seed)
    out, t = [], 0.0
    phases = [(BEFORE_S, BASE), (BURST_S, factor * BASE), (AFTER_S, BASE)]
    end = 0.0
    for seconds, rate in phases:
        end += seconds * 1000
        while True:
            t += rnd.expovariate(rate / 1000)
            if t >= end:
                t = end
                break
            out.append({"k": rnd.randrange(100), "v": rnd.randrange(1000), "ts": int(t)})
    return out


def pipeline(source: str, sink: str, budget: int = BUDGET) -> str:
    return f"""\
version: 1
name: {NAME}
time_unit: ms
resources: {{memory_budget: {budget}}}
streams:
  S:
    schema: {{k: int, v: int, ts: int}}
    timestamp: ts
    source: {source}
queries:
  per_key:
    cql: {CQL}
    sink: {{type: file, path: {sink}, format: jsonl}}
    qos: {{window: [500, {WINDOW}]}}
"""


def produce(bootstrap: str, topic: str, records: list[dict], done: threading.Event,
            live: bool = True) -> None:
    """Send each record (live: when the wall clock reaches its timestamp), then the flush
    record."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION,
                             acks=1, linger_ms=5)
    start = time.monotonic()
    for r in records:
        wait = r["ts"] / 1000 - (time.monotonic() - start)
        if live and wait > 0:
            time.sleep(wait)
        producer.send(topic, json.dumps(r).encode())
    producer.send(topic, json.dumps({"k": 0, "v": 0, "ts": FLUSH}).encode())
    producer.flush()
    producer.close()
    done.set()


def elements(path: Path) -> list[tuple]:
    out = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        if obj["_ts"] < FLUSH:
            out.append((obj["_ts"], obj["_op"], obj["k"], obj["n"], obj["total"]))
    return out


@pytest.mark.parametrize(
    ("live", "factor", "budget"),
    [(True, 10, BUDGET), (False, 10, BUDGET), (False, 1, FIRST_FILL_BUDGET)],
    ids=["live", "catching-up", "first-fill"],
)
def test_a_budget_holds_through_a_burst_with_nothing_lost(
    tmp_path: Path, kafka_bootstrap: str, new_topic, live: bool, factor: int, budget: int
) -> None:
    """`first-fill`: no burst, but the full window does not fit even at the base rate, so the
    budget binds while the window first fills."""
    topic = new_topic(1)
    records = schedule(factor)
    folder = tmp_path / "pipelines"
    (folder / NAME).mkdir(parents=True)
    source = f"{{type: kafka, topic: {topic}, start: earliest, bootstrap_servers: {kafka_bootstrap}}}"
    (folder / NAME / "pipeline.yaml").write_text(pipeline(source, "out/per_key.jsonl", budget))
    catalog = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    catalog.upgrade()
    config = ServiceConfig(
        pipelines=str(folder), catalog=catalog.url, port=0, name="bursts-worker",
        manage_interval=0.25, batch_rows=2000, checkpoint_interval=0.5, snapshot_interval=0,
        reconcile_interval=3600,
    )
    worker = Worker(config, catalog)
    engine_thread = threading.Thread(target=worker.run, daemon=True)
    produced = threading.Event()
    producer = threading.Thread(target=produce, daemon=True,
                                args=(kafka_bootstrap, topic, records, produced, live))
    if not live:
        producer.start()
        producer.join(60)
    engine_thread.start()
    waits: list[float] = []  # how long /metrics' call to the engine thread took, every 0.1 s
    polling = threading.Event()

    def poll_metrics() -> None:
        while not polling.is_set():
            start = time.monotonic()
            worker.call(lambda: views.metrics_snapshot(worker), timeout=10)
            waits.append(time.monotonic() - start)
            time.sleep(0.1)

    poller = threading.Thread(target=poll_metrics, daemon=True)
    try:
        deadline = time.monotonic() + 30
        while NAME not in worker.pipelines and time.monotonic() < deadline:
            time.sleep(0.05)
        assert NAME in worker.pipelines, worker.errors
        poller.start()
        if live:
            producer.start()
        producer.join(BEFORE_S + BURST_S + AFTER_S + 30)
        assert produced.is_set(), "the producer did not finish"
        # The lag drains: every record is read, the flush record included.
        key = next(iter(worker.sources))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            source = worker.engine.sources[key]
            if source.rows_in == len(records) + 1 and worker.lags.get(key, 1) == 0:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(
                f"lag not drained: read {worker.engine.sources[key].rows_in} of "
                f"{len(records) + 1}, lag {worker.lags.get(key)}"
            )
        snapshot = worker.call(lambda: views.metrics_snapshot(worker))
    finally:
        polling.set()
        poller.join(15)
        worker.stop()
        engine_thread.join(60)
    assert not engine_thread.is_alive()

    state = worker.budgets.states[NAME]
    row_bytes = worker.engine.sources[key].output.total_bytes / (len(records) + 1)
    densest = max(sum(1 for r in records if t - WINDOW <= r["ts"] <= t)
                  for t in range(0, int((BEFORE_S + BURST_S + AFTER_S) * 1000), 250))
    print(f"\n{'live' if live else 'catching up'} ×{factor}: budget {budget} B; peak sampled "
          f"{state.peak:.0f} B = {state.peak / budget:.3f} × "
          f"budget over {state.samples} samples; the full window would hold {densest} rows "
          f"≈ {densest * row_bytes:.0f} B; pauses "
          f"{ {k: p.pauses for k, p in worker.pacing.sources.items()} }; /metrics waited at "
          f"most {max(waits):.3f} s ({len(waits)} calls)")
    # The API's calls to the engine thread are answered within a second throughout.
    assert len(waits) >= 5 and max(waits) < 1.0
    # The budget binds: the burst at the full window does not fit.
    assert densest * row_bytes > 1.3 * budget
    # Every sample of the keeper's measured figure (state + queued, each turn) is inside it.
    assert state.samples >= 50
    assert state.over == 0 and state.peak <= budget, (state.peak, state.over)
    # Nothing is shed (the only source can wait) ...
    kinds = [r.kind for r in catalog.adjustments(NAME)]
    assert "shed" not in kinds
    assert all(w.shed_dropped == 0 for w in worker.engine.windows(NAME, "per_key"))
    assert snapshot["budgets"][NAME]["samples_over_budget"] == 0
    # ... the window did shrink ...
    logged = [logged_adjustment(r) for r in catalog.adjustments(NAME)
              if r.kind in ("window", "granularity")]
    assert any(a.new < WINDOW for a in logged if a.knob == "window")
    # ... and the results are exact for the settings in force: `cq run` over the same records,
    # replaying the worker's adjustment log, writes the same elements.
    ref = tmp_path / "reference"
    ref.mkdir()
    with (ref / "s.csv").open("w") as f:
        f.write("ts,k,v\n")
        for r in [*records, {"k": 0, "v": 0, "ts": FLUSH}]:
            f.write(f"{r['ts']},{r['k']},{r['v']}\n")
    (ref / "pipeline.yaml").write_text(
        pipeline("{type: file, path: s.csv, format: csv}", "out/per_key.jsonl", budget)
    )
    run_pipeline(load_and_compile(ref / "pipeline.yaml"), adjustments=logged)
    got = elements(folder / NAME / "out" / "per_key.jsonl")
    want = elements(ref / "out" / "per_key.jsonl")
    assert len(want) > 1000
    assert got == want
