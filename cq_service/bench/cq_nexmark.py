"""Our engine as a NEXMark benchmark participant (the same command line as the peers).

    python -m cq_service.bench.cq_nexmark --data DIR --query q3 --out OUT.parquet
    python -m cq_service.bench.cq_nexmark --query q3 --events N --pace P --out OUT.parquet

The first form runs one query of pipelines/nexmark/nexmark.yaml over the Parquet files in DIR
(what the peers read) and writes the comparable result. The second replays the generator in
real time at P events per second (all kinds) and measures latency: an element emitted for
instant τ is late by (wall time of the write to its sink) − (wall time at which the replay
made the events of time τ available). Prints one JSON line, as the peers do.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from cq_service.bench.comparable import from_cql
from cq_service.compiler import compile_pipeline, subset
from cq_service.io.generator import replay_time
from cq_service.io.nexmark import BASE_TIME_MS
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline
from cq_service.spec.model import PipelineSpec, SinkSpec, SourceSpec

__all__ = ["NEXMARK_PIPELINE", "main", "one_query"]

NEXMARK_PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "nexmark" / "nexmark.yaml"


def one_query(
    spec: PipelineSpec,
    query: str,
    result: Path,
    *,
    data: Path | None = None,
    events: int | None = None,
    pace: float | None = None,
    rate: float | None = None,
) -> PipelineSpec:
    """The pipeline with just `query` (and what it reads), its sink a Parquet file `result`,
    its generator sources replaced by `data`'s files, or given `events` and `pace`."""
    spec = subset(spec, [query])

    def source(s: SourceSpec) -> SourceSpec:
        if s.type != "generator":
            return s
        if data is not None:
            table = s.options["table"]
            return SourceSpec("file", str(data / f"{table}.parquet"), "parquet", {}, s.span)
        options = dict(s.options)
        if events is not None:
            options["events"] = events
        if pace is not None:
            options["pace"] = pace
        if rate is not None:
            options["rate"] = rate
        return replace(s, options=options)

    streams = {n: replace(s, source=source(s.source)) for n, s in spec.streams.items()}
    relations = {n: replace(s, source=source(s.source)) for n, s in spec.relations.items()}
    queries = {
        n: replace(q, sink=SinkSpec("file", str(result), "parquet")) if q.sink else q
        for n, q in spec.queries.items()
    }
    return replace(spec, streams=streams, relations=relations, queries=queries)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--query", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--data", type=Path)
    ap.add_argument("--events", type=int)
    ap.add_argument("--pace", type=float)
    ap.add_argument("--rate", type=float, help="events per second of event time (generator)")
    ap.add_argument("--pipeline", type=Path, default=NEXMARK_PIPELINE)
    ap.add_argument("--batch-rows", type=int, default=65_536)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "result.parquet"
        # In-process time, as the peers take it: from reading and planning the query to its
        # last output written (compiling, opening the sources and closing the sink included).
        started = time.perf_counter()
        spec = load_pipeline(args.pipeline)
        one = one_query(
            spec, args.query, raw, data=args.data, events=args.events, pace=args.pace,
            rate=args.rate,
        )
        compiled = compile_pipeline(one)
        writes: list[tuple[float, np.ndarray]] = []

        def observe(_query: str, ts: np.ndarray) -> None:
            writes.append((time.perf_counter(), ts.copy()))

        report = run_pipeline(
            compiled, batch_rows=args.batch_rows, observer=observe if args.pace else None
        )
        seconds = time.perf_counter() - started
        table = pq.read_table(raw)
    latency = None
    if args.pace and args.events:
        latency = _latency(writes, one)
    result = from_cql(args.query, table)
    pq.write_table(result, args.out)
    print(
        json.dumps(
            {
                "engine": "cq",
                "query": args.query,
                "supported": True,
                "note": "",
                "seconds": seconds,
                "run_seconds": report.seconds,  # the executor's run alone
                "rows": table.num_rows,
                "latency_ms": latency,
                # The engine's own accounting: every synopsis and queue at their joint peak.
                "state_bytes": report.executor.memory.peak_total_bytes,
            }
        )
    )
    return 0


def _latency(writes: list[tuple[float, np.ndarray]], spec: PipelineSpec) -> dict | None:
    """p50 and p99, in ms, over every element emitted for an instant the replay reached (see
    the module docstring; what the end of input flushes at once is not latency)."""
    opts = next(
        s.source.options for s in spec.streams.values() if s.source.type == "generator"
    )
    seed, rate, pace = int(opts.get("seed", 0)), float(opts.get("rate", 10_000)), float(opts["pace"])
    last = BASE_TIME_MS + np.floor((int(opts["events"]) - 1) * 1000.0 / rate)
    lat = [wall - replay_time(ts[ts <= last], seed, rate, pace) for wall, ts in writes]
    lat_ms = np.concatenate(lat) * 1000.0 if lat else np.zeros(0)
    if len(lat_ms) == 0:
        return None
    p50, p99 = np.percentile(lat_ms, [50, 99])
    return {"p50": float(p50), "p99": float(p99), "elements": len(lat_ms)}


if __name__ == "__main__":
    sys.exit(main())
