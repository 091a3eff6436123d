"""What reading SysStream costs (docs/sys-stream.md, "Overhead").

The NEXMark pipeline (pipelines/nexmark/nexmark.yaml: q0-q8 over the built-in generator, sinks
replaced by blackholes) is run by `run_pipeline` in-process, planning inside the timer, three
ways in the same process and interleaved: as it is, with one more query
`SELECT * FROM SysStream` (every entity, every interval) at an interval of 1 s and of 100 ms of
event time. The figure is each run's seconds over the baseline's (medians of --repeat, after one warm-up run), and the
time spent taking snapshots (`EntityStatistics.snapshot`, measured around each call).

    .venv/bin/python benchmarks/sys_stream.py [--events 200000] [--repeat 3] [--batch-rows 2000]
                                              [--quick] [--json]

Snapshots are taken when the pipeline's clock passes a boundary, and the clock moves once per
source batch: with large batches, an interval shorter than a batch's span of event time gets
one snapshot per batch (docs/sys-stream.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from cq_service.compiler import compile_pipeline
from cq_service.engine.statistics import EntityStatistics
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline
from cq_service.spec.model import QuerySpec, SinkSpec

HERE = Path(__file__).resolve().parent
NEXMARK = HERE.parent / "pipelines" / "nexmark" / "nexmark.yaml"
BLACKHOLE = SinkSpec("blackhole")


def _spec(events: int, interval: int | None):
    spec = load_pipeline(NEXMARK)
    streams = {
        n: replace(s, source=replace(s.source, options={**s.source.options, "events": events}))
        if s.source.type == "generator" else s
        for n, s in spec.streams.items()
    }
    # views (no sink) stay views; every sink becomes a blackhole
    queries = {n: replace(q, sink=BLACKHOLE) if q.sink else q for n, q in spec.queries.items()}
    if interval is not None:
        queries["monitor"] = QuerySpec("monitor", "SELECT * FROM SysStream", BLACKHOLE)
        spec = replace(spec, resources=replace(spec.resources, statistics_interval=interval))
    return replace(spec, streams=streams, queries=queries)


def _timed_snapshots() -> list[float]:
    """Wrap `EntityStatistics.snapshot` to record the seconds of each call."""
    spent: list[float] = []
    original = EntityStatistics.snapshot

    def snapshot(self, clock):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return original(self, clock)
        finally:
            spent.append(time.perf_counter() - start)

    EntityStatistics.snapshot = snapshot  # type: ignore[method-assign]
    return spent


def run(events: int, repeat: int, batch_rows: int) -> dict:
    spent = _timed_snapshots()
    variants = {"baseline": None, "1 s": 1000, "100 ms": 100}
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    snapshots: dict[str, list[float]] = {v: [] for v in variants}
    counts: dict[str, int] = {}
    run_pipeline(compile_pipeline(_spec(events, 1000)), batch_rows=batch_rows)  # warm-up: imports, caches
    for _ in range(repeat):
        for name, interval in variants.items():  # interleaved: drift hits every variant alike
            spec = _spec(events, interval)
            spent.clear()
            start = time.perf_counter()
            report = run_pipeline(compile_pipeline(spec), batch_rows=batch_rows)
            seconds[name].append(time.perf_counter() - start)
            snapshots[name].append(sum(spent))
            counts[name] = len(spent)
    base = statistics.median(seconds["baseline"])
    out = {"events": events, "repeat": repeat, "batch_rows": batch_rows, "variants": {}}
    for name in variants:
        med = statistics.median(seconds[name])
        out["variants"][name] = {
            "seconds": med,
            "ratio": med / base,
            "snapshot_seconds": statistics.median(snapshots[name]),
            "snapshots": counts[name],
        }
    out["entities"] = len(report.executor.operators) + len(report.executor.queues)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--batch-rows", type=int, default=2000, help="as cq run --batch-rows")
    p.add_argument("--quick", action="store_true", help="20,000 events, once")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    events, repeat = (20_000, 1) if a.quick else (a.events, a.repeat)
    result = run(events, repeat, a.batch_rows)
    if a.json:
        print(json.dumps(result))
        return 0
    print(f"NEXMark q0-q8, {events:,} events, batches of {a.batch_rows} rows, "
          f"{result['entities']} entities, median of {repeat}")
    for name, v in result["variants"].items():
        each = v["snapshot_seconds"] / v["snapshots"] * 1e3 if v["snapshots"] else 0.0
        print(f"  {name:>8}: {v['seconds']:.3f} s  x{v['ratio']:.3f}  {v['snapshots']} snapshots "
              f"taking {v['snapshot_seconds'] * 1e3:.1f} ms ({each:.2f} ms each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
