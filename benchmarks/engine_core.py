"""Engine-core benchmark (issues 2 and 21), end to end through `cq run` into a blackhole sink.

    .venv/bin/python benchmarks/engine_core.py [--events 10000000] [--repeat 3] [--quick]
        [--only SUBSTRING] [--core | --groups-only] [--groups 10000,100000,1000000]
        [--ratios 1,10,60] [--forms istream,relation] [--group-events 10000000] [--no-spark]

Two tables, medians of --repeat runs:

* core: three pipelines over the same Parquet events, each next to the I/O floor measured in
  the same run (pyarrow reading the same file);
* groups: grouped sliding aggregates with many groups (benchmarks/many_groups.py) — 10 k,
  100 k and 1 M groups, window/slide ratios T/L of 1, 10 and 60, under Istream and as a
  relation — each next to Spark computing the same windowed groups over the same file in the
  same run (benchmarks/spark_groups.py says exactly what Spark runs).

`--quick`: 1 M events, the 10 k-groups rows at T/L 10, one run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import many_groups  # benchmarks/many_groups.py, beside this file
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.bench.bytecode import compile_package

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

PIPELINES = {
    "filter+project": (
        "SELECT Istream(id, price * 2 AS double_price) FROM Events WHERE price > 500",
        "≥ 2 M events/s",
    ),
    "grouped count, [Range 10 s Slide 2 s]": (
        "SELECT kind, COUNT(*) AS n FROM Events [Range 10 Seconds Slide 2 Seconds] GROUP BY kind",
        "≥ 500 k events/s",
    ),
    "equi-join, two [Range 5 s] windows": (
        "SELECT Istream(L.id, R.id) FROM Events L [Range 5 Seconds], Others R [Range 5 Seconds] "
        "WHERE L.key = R.key",
        "≥ 200 k events/s",
    ),
}


def make_data(n: int) -> tuple[Path, Path]:
    """`n` events, 10 per millisecond, and a second stream of n/10 events, 1 per millisecond.
    Join keys are drawn from 10 000 values, so a [Range 5 s] window of the second stream holds
    about half a match per key and each new event of it meets about 5 in the first."""
    DATA.mkdir(exist_ok=True)
    events, others = DATA / f"events-v2-{n}.parquet", DATA / f"others-v2-{n}.parquet"
    rng = np.random.default_rng(42)
    if not events.exists():
        ts = np.arange(n, dtype=np.int64) // 10  # ms: 10 events per ms
        table = pa.table(
            {
                "ts": ts,
                "id": np.arange(n, dtype=np.int64),
                "kind": rng.integers(0, 100, n),
                "key": rng.integers(0, 10_000, n),
                "price": rng.integers(0, 1000, n),
            }
        )
        pq.write_table(table, events, row_group_size=1 << 20)
    if not others.exists():
        m = n // 10
        table = pa.table(
            {
                "ts": np.arange(m, dtype=np.int64),
                "id": np.arange(m, dtype=np.int64),
                "key": rng.integers(0, 10_000, m),
            }
        )
        pq.write_table(table, others, row_group_size=1 << 20)
    return events, others


def pipeline_file(name: str, cql: str, events: Path, others: Path) -> Path:
    slug = "".join(c if c.isalnum() else "_" for c in name)[:40]
    path = DATA / f"bench_{slug}.yaml"
    uses_others = "Others" in cql
    path.write_text(
        "version: 1\n"
        f"name: bench-{slug.replace('_', '-').strip('-')}\n"
        "time_unit: ms\n"
        "streams:\n"
        "  Events:\n"
        "    schema: {id: int, kind: int, key: int, price: int}\n"
        "    timestamp: ts\n"
        f"    source: {{type: file, path: {events}, format: parquet}}\n"
        + (
            "  Others:\n"
            "    schema: {id: int, key: int}\n"
            "    timestamp: ts\n"
            f"    source: {{type: file, path: {others}, format: parquet}}\n"
            if uses_others
            else ""
        )
        + "queries:\n"
        "  q:\n"
        f"    cql: \"{cql}\"\n"
        "    sink: {type: blackhole}\n"
    )
    return path


def io_floor(path: Path) -> float:
    """Seconds for pyarrow alone to read the file in the engine's batch size."""
    start = time.perf_counter()
    for _ in pq.ParquetFile(path).iter_batches(batch_size=65_536):
        pass
    return time.perf_counter() - start


def run_cq(path: Path) -> float:
    cq = Path(sys.executable).with_name("cq")
    start = time.perf_counter()
    subprocess.run([str(cq), "run", str(path)], check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default=None, help="substring of a pipeline name")
    ap.add_argument("--quick", action="store_true", help="small inputs, few rows, one run")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--core", action="store_true", help="only the core pipelines")
    which.add_argument("--groups-only", action="store_true", help="only the grouped aggregates")
    many_groups.add_arguments(ap)
    args = ap.parse_args()
    compile_package()  # every timed `cq run` starts as an installed package would
    if args.quick:
        args.events, args.repeat = min(args.events, 1_000_000), 1
        many_groups.quick(args)
    if not args.groups_only:
        core(args)
    if not args.core:
        many_groups.run(args)


def core(args: argparse.Namespace) -> None:
    events, others = make_data(args.events)
    n = args.events
    print(f"{n:,} events in {events.name}")
    floor = statistics.median(io_floor(events) for _ in range(args.repeat))
    print(f"I/O floor (pyarrow read): {floor:.2f} s = {n / floor / 1e6:.1f} M events/s")
    print(f"{'pipeline':<40} {'seconds':>8} {'events/s':>12} {'vs floor':>9}  target")
    for name, (cql, target) in PIPELINES.items():
        if args.only and args.only not in name:
            continue
        path = pipeline_file(name, cql, events, others)
        total = n + (n // 10 if "Others" in cql else 0)
        secs = statistics.median(run_cq(path) for _ in range(args.repeat))
        print(
            f"{name:<40} {secs:>8.2f} {total / secs:>12,.0f} {secs / floor:>8.1f}x  {target}"
        )


if __name__ == "__main__":
    main()
