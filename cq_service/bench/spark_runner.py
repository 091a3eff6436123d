"""`cq bench spark-runner`: the Spark runner against `cq run` on the same Kafka topics, and the
runner's cost per micro-batch as history grows.

One run produces NEXMark events once to Kafka (person, auction and bid topics, 2 partitions,
reused by later runs of the same size and seed), and for each query measures, `repeat` times,
(a) `cq run` of the query's pipeline reading the topics (the embedded engine's Kafka path, in
this process, planning inside the timer) and (b) the Spark runner (`batch.streaming`) over the
same topics on a warm Spark session (its start excluded, as backfill's bench does), with
micro-batches of at most `batch` Kafka messages. Rates are all events / seconds; every run's
results must equal `cq run`'s (per-instant bags), or the run fails.

`history(...)` runs one query (q3 by default: a join of unbounded windows) over many
micro-batches and records each batch's seconds, elements fed and state bytes: the per-batch
cost as history grows.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cq_service.bench.cq_nexmark import NEXMARK_PIPELINE
from cq_service.compiler import compile_pipeline, subset
from cq_service.spec import load_pipeline
from cq_service.spec.model import PipelineSpec, SinkSpec, SourceSpec

__all__ = ["QUERIES", "Row", "history", "plot", "run", "text"]

QUERIES = ("q1", "q3", "q7")  # key path stateless, key path unbounded join, single key
_KINDS = {"Person": "person", "Auction": "auction", "Bid": "bid", "ClosedAuction": "auction"}


@dataclass
class Row:
    query: str
    path: str
    events: int
    batches: int = 0
    run_seconds: list[float] = field(default_factory=list)
    runner_seconds: list[float] = field(default_factory=list)
    results: int = 0
    kept: float = 0.0  # share of bucket steps that went on with a kept engine

    @property
    def run_rate(self) -> float:
        return self.events / statistics.median(self.run_seconds)

    @property
    def runner_rate(self) -> float:
        return self.events / statistics.median(self.runner_seconds)


def _kinds(queries: tuple[str, ...]) -> tuple[str, ...]:
    """The NEXMark event kinds the queries read."""
    spec = subset(load_pipeline(NEXMARK_PIPELINE), list(queries))
    return tuple(sorted({_KINDS[n] for n in spec.streams}))


def ensure_topics(bootstrap: str, events: int, seed: int, kinds: tuple[str, ...],
                  say=print) -> dict[str, str]:
    """The topics of the NEXMark events of `kinds` (person, auction, bid) among `events`,
    produced unless present."""
    import numpy as np
    import pyarrow as pa

    from cq_service.bench.kafka_bench import ensure_input
    from cq_service.io import nexmark

    data = {}
    for kind in kinds:
        table = pa.concat_tables(list(nexmark.generate_kind(kind, events, seed=seed)))
        cols = {n: table[n].to_numpy(zero_copy_only=False) for n in table.column_names}
        if "id" not in cols:  # bids: `encode` leaves this position out of the message
            cols["id"] = np.arange(table.num_rows, dtype=np.int64)
        data[f"nx{kind}"] = cols
    names = ensure_input(bootstrap, events, seed, data, say=say)
    return {kind: names[f"nx{kind}"] for kind in kinds}


def pipeline(query: str, topics: dict[str, str], bootstrap: str, out: Path) -> PipelineSpec:
    """NEXMark's `query` (with the views it reads) reading the topics, writing jsonl to `out`."""
    spec = subset(load_pipeline(NEXMARK_PIPELINE), [query])
    streams = {
        n: dataclasses.replace(s, source=SourceSpec("kafka", options={
            "topic": topics[_KINDS[n]], "bootstrap_servers": bootstrap, "start": "earliest"}))
        for n, s in spec.streams.items()
    }
    queries = {n: dataclasses.replace(q, sink=SinkSpec("file", str(out / f"{n}.jsonl"), "jsonl"))
               if q.sink else q for n, q in spec.queries.items()}
    return dataclasses.replace(spec, streams=streams, queries=queries,
                               dead_letter=SinkSpec("file", str(out / "dead.jsonl"), "jsonl"))


def _bags(path: Path) -> dict[int, Counter]:
    out: dict[int, Counter] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            out.setdefault(json.loads(line)["_ts"], Counter())[line] += 1
    return out


def _runner(spec: PipelineSpec, spark: Any, checkpoint: Path, batch: int | None):
    from cq_service.batch.streaming import StreamingJob

    job = StreamingJob(spec, spark, checkpoint, max_offsets_per_trigger=batch)
    return job.run(available_now=True, final=True)


def run(bootstrap: str, events: int, repeat: int = 3, queries: tuple[str, ...] = QUERIES,
        batch: int | None = None, master: str | None = None, seed: int = 0,
        work: Path | None = None, say=print) -> list[Row]:
    from cq_service.batch.streaming import spark_session, supported
    from cq_service.runner import run_pipeline

    topics = ensure_topics(bootstrap, events, seed, _kinds(queries), say=say)
    spark = spark_session(master)
    spark.sparkContext.setLogLevel("ERROR")
    rows = []
    with tempfile.TemporaryDirectory(prefix="cq-bench-runner-", dir=work) as tmp:
        d = Path(tmp)
        for q in queries:
            emb = pipeline(q, topics, bootstrap, d / f"emb-{q}")
            part, why = supported(emb, q)
            if part is None:
                raise RuntimeError(f"{q}: {why}")
            row = Row(q, part.path, events)
            for k in range(repeat):
                start = time.perf_counter()
                run_pipeline(compile_pipeline(emb))
                row.run_seconds.append(time.perf_counter() - start)
                out = d / f"spark-{q}-{k}"
                spec = pipeline(q, topics, bootstrap, out)
                start = time.perf_counter()
                report = _runner(spec, spark, d / f"ckpt-{q}-{k}", batch)
                row.runner_seconds.append(time.perf_counter() - start)
                expected = _bags(d / f"emb-{q}" / f"{q}.jsonl")
                if _bags(out / f"{q}.jsonl") != expected:
                    raise AssertionError(f"{q}: the Spark runner differs from cq run")
                row.results = sum(sum(c.values()) for c in expected.values())
                row.batches = report.batches
                steps = report.steps.get(q, [])
                buckets = sum(s["buckets"] for s in steps)
                row.kept = sum(s["kept"] for s in steps) / buckets if buckets else 0.0
            say(f"{q}: cq run {row.run_rate:,.0f} ev/s, runner {row.runner_rate:,.0f} ev/s")
            rows.append(row)
    return rows


def history(bootstrap: str, events: int, batch: int, query: str = "q3",
            master: str | None = None, seed: int = 0, work: Path | None = None,
            say=print) -> list[dict[str, float]]:
    """One runner job of `query` over `events` in micro-batches of `batch` messages: per
    batch, the events read so far, its seconds, the elements fed to the engine and the state
    bytes saved."""
    from cq_service.batch.streaming import spark_session

    topics = ensure_topics(bootstrap, events, seed, _kinds((query,)), say=say)
    spark = spark_session(master)
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="cq-bench-history-", dir=work) as tmp:
        d = Path(tmp)
        report = _runner(pipeline(query, topics, bootstrap, d / "out"), spark, d / "ckpt", batch)
    out, read = [], 0
    by_batch = {s["batch"]: s for s in report.steps.get(query, [])}
    for k, (seconds, messages) in enumerate(zip(report.batch_seconds, report.batch_messages,
                                                strict=True)):
        read += messages
        step = by_batch.get(k, {"fed": 0, "state_bytes": 0})
        out.append({"events": read, "seconds": seconds, "fed": step["fed"],
                    "state_bytes": step["state_bytes"]})
    return out


def text(rows: list[Row], repeat: int, batch: int | None, master: str) -> str:
    events = rows[0].events if rows else 0
    lines = [
        f"Spark runner vs cq run: NEXMark on Kafka (2 partitions), {events:,} events, median of "
        f"{repeat}, Spark {master} (warm session), micro-batches of "
        f"{'all available' if not batch else f'{batch:,}'} messages",
        "",
        f"{'query':6} {'path':7} {'cq run ev/s':>12} {'runner ev/s':>12} {'ratio':>6} "
        f"{'batches':>8} {'kept':>5}  results",
    ]
    for r in rows:
        lines.append(f"{r.query:6} {r.path:7} {r.run_rate:12,.0f} {r.runner_rate:12,.0f} "
                     f"{r.runner_rate / r.run_rate:6.2f} {r.batches:8} {r.kept:5.0%}  "
                     f"{r.results:,}")
    return "\n".join(lines)


def plot(points: list[dict[str, float]], path: Path, events: int | None = None) -> None:
    """Seconds and state per micro-batch against the query's input elements read so far
    (`events`: the NEXMark events they are among, for the title)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    read = [p["events"] / 1e6 for p in points]
    fig, left = plt.subplots(figsize=(7, 3.5))
    left.plot(read, [p["seconds"] for p in points], "o-", color="tab:blue")
    left.set_xlabel("the query's input elements read (millions)")
    left.set_ylabel("seconds per micro-batch", color="tab:blue")
    left.set_ylim(bottom=0)
    right = left.twinx()
    right.plot(read, [p["state_bytes"] / 2**20 for p in points], "s--", color="tab:red")
    right.set_ylabel("engine state saved (MiB)", color="tab:red")
    right.set_ylim(bottom=0)
    among = f" (among {events / 1e6:g} M NEXMark events)" if events else ""
    fig.suptitle(f"Spark runner, NEXMark q3{among}: cost per micro-batch as history grows",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
