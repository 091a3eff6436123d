"""Grouped sliding aggregates with many groups (issue 21, part 4): the `groups` table of
`make bench` (benchmarks/engine_core.py).

The input: `--group-events` events (ts int64 ms, g, v), 100 per millisecond of event time, so a
10 s window holds 1 M events and a 60 s one 6 M; g uniform over G values (one Parquet file per
G), v uniform in [0, 1000). Each row is one query, run end to end by `cq run` (whole process,
into a blackhole sink; cq_service byte-compiled first, as an installed package is)

    SELECT Istream(g, COUNT(*) AS n, SUM(v) AS s) FROM E [Range T Seconds Slide L Seconds] GROUP BY g
    SELECT g, COUNT(*) AS n, SUM(v) AS s FROM E [Range T Seconds Slide L Seconds] GROUP BY g

for T/L = 1 (10 s / 10 s), 10 (10 s / 1 s) and 60 (60 s / 1 s), next to Spark computing the same
windowed groups over the same file in the same run (benchmarks/spark_groups.py: batch Spark,
`local[2]`, timed in-process in a session started beforehand). Events/s is events ÷ seconds;
cq ÷ Spark is Spark's seconds ÷ cq's. Medians of --repeat runs. Rows: what cq's sink received
(first run; `cq run --stats`) and what Spark wrote. cq is also timed in-process, between the
boundaries Spark's figure has (imports done, as Spark's session is started beforehand; from
loading the pipeline file, planning inside the timer, to the sink's last write), and cq ÷ Spark
is given for both; under Istream they must agree (the Istream
rows of the same windows), as a relation they differ by design (cq emits each group's change as
− old, + new; Spark every group of every window).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["add_arguments", "quick", "run"]

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
EVENTS_PER_MS = 100
RATIOS = {1: (10, 10), 10: (10, 1), 60: (60, 1)}  # T/L -> (range s, slide s)
FORMS = ("istream", "relation")
SPARK = (
    "batch Spark (local[2]) over the same file: groupBy(window(ts, T + 1 ms, L), g)"
    ".agg(count, sum), windows up to the last event, to the noop sink; istream: left anti join "
    "with the previous slide's rows; timed in-process (session started beforehand)"
)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--groups", default="10000,100000,1000000", help="group counts, comma-separated")
    ap.add_argument("--ratios", default="1,10,60", help="T/L window/slide ratios: 1, 10, 60")
    ap.add_argument("--forms", default=",".join(FORMS), help="istream, relation")
    ap.add_argument("--group-events", type=int, default=10_000_000)
    ap.add_argument("--no-spark", action="store_true", help="cq only")


def quick(args: argparse.Namespace) -> None:
    args.groups, args.ratios = "10000", "10"
    args.group_events = min(args.group_events, 1_000_000)


def make_data(n: int, groups: int) -> Path:
    DATA.mkdir(exist_ok=True)
    path = DATA / f"groups-{groups}-{n}.parquet"
    if not path.exists():
        rng = np.random.default_rng(groups)
        table = pa.table({
            "ts": np.arange(n, dtype=np.int64) // EVENTS_PER_MS,
            "g": rng.integers(0, groups, n),
            "v": rng.integers(0, 1000, n),
        })
        pq.write_table(table, path, row_group_size=1 << 20)
    return path


def cql(form: str, range_s: int, slide_s: int) -> str:
    sel = "g, COUNT(*) AS n, SUM(v) AS s"
    body = f"FROM E [Range {range_s} Seconds Slide {slide_s} Seconds] GROUP BY g"
    return f"SELECT Istream({sel}) {body}" if form == "istream" else f"SELECT {sel} {body}"


def pipeline_file(data: Path, groups: int, ratio: int, form: str) -> Path:
    range_s, slide_s = RATIOS[ratio]
    name = f"groups-{groups}-tl{ratio}-{form}"
    path = DATA / f"bench_{name}.yaml"
    path.write_text(
        "version: 1\n"
        f"name: bench-{name}\n"
        "time_unit: ms\n"
        "streams:\n"
        "  E:\n"
        "    schema: {g: int, v: int}\n"
        "    timestamp: ts\n"
        f"    source: {{type: file, path: {data}, format: parquet}}\n"
        "queries:\n"
        "  q:\n"
        f"    cql: \"{cql(form, range_s, slide_s)}\"\n"
        "    sink: {type: blackhole}\n"
    )
    return path


def run_spark(data: Path, ratio: int, form: str, repeat: int) -> tuple[float, int | None]:
    """Median seconds of `repeat` Spark runs in one session, and the rows of the first."""
    range_s, slide_s = RATIOS[ratio]
    last_ts = (pq.ParquetFile(data).metadata.num_rows - 1) // EVENTS_PER_MS
    out = subprocess.run(
        [sys.executable, str(HERE / "spark_groups.py"), "--data", str(data),
         "--range-s", str(range_s), "--slide-s", str(slide_s), "--last-ts", str(last_ts),
         "--form", form, "--repeat", str(repeat)],
        check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    runs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return statistics.median(r["seconds"] for r in runs), runs[0]["rows"]


def run_cq(path: Path) -> tuple[float, int]:
    """Seconds of `cq run --stats` (whole process) and the rows its sink received."""
    cq = Path(sys.executable).with_name("cq")
    start = time.perf_counter()
    done = subprocess.run([str(cq), "run", str(path), "--stats"], check=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    secs = time.perf_counter() - start
    sink = [ln for ln in done.stderr.splitlines() if ln.startswith("q sink q")]
    return secs, int(sink[0].split()[-5])


# cq in-process, between the boundaries Spark's figure has: imports done (Spark's session is
# started beforehand), then from loading the pipeline file (planning inside the timer) to the
# sink's last write; one fresh interpreter per run.
_IN_PROCESS = """
import json, sys, time
from cq_service.compiler import load_and_compile
from cq_service.runner import run_pipeline
start = time.perf_counter()
report = run_pipeline(load_and_compile(sys.argv[1]))
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "rows": sum(report.sinks.values())}))
"""


def run_cq_in_process(path: Path) -> tuple[float, int]:
    """Seconds of the query in a process whose imports are done, and the rows its sink got."""
    done = subprocess.run([sys.executable, "-c", _IN_PROCESS, str(path)], check=True,
                          stdout=subprocess.PIPE, text=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["seconds"], out["rows"]


def run(args: argparse.Namespace) -> None:
    n = args.group_events
    counts = [int(x) for x in args.groups.split(",")]
    ratios = [int(x) for x in args.ratios.split(",")]
    forms = [f for f in args.forms.split(",") if f]
    unknown = [r for r in ratios if r not in RATIOS] + [f for f in forms if f not in FORMS]
    if unknown:
        raise SystemExit(f"unknown ratio or form: {unknown}")
    print()
    print(f"grouped sliding aggregates: {n:,} events, {EVENTS_PER_MS} per ms; "
          f"medians of {args.repeat}")
    if not args.no_spark:
        print(f"Spark: {SPARK}")
    print(f"{'groups':>9} {'T/L':>4} {'form':<9} {'cq s':>7} {'cq events/s':>12} "
          f"{'cq rows':>10} {'cq in-proc s':>12} {'Spark s':>8} {'Spark ev/s':>11} "
          f"{'cq÷Spark':>8} {'in-proc':>8} {'Spark rows':>11} {'agree':>6}")
    for g in counts:
        data = make_data(n, g)
        for ratio in ratios:
            for form in forms:
                path = pipeline_file(data, g, ratio, form)
                runs = [run_cq(path) for _ in range(args.repeat)]
                secs = statistics.median(r[0] for r in runs)
                rows = runs[0][1]
                inner = [run_cq_in_process(path) for _ in range(args.repeat)]
                isecs = statistics.median(r[0] for r in inner)
                if any(r[1] != rows for r in inner):
                    raise SystemExit(f"cq in-process wrote {inner[0][1]} rows, cq run {rows}")
                line = (f"{g:>9,} {ratio:>4} {form:<9} {secs:>7.2f} {n / secs:>12,.0f} "
                        f"{rows:>10} {isecs:>12.2f}")
                if not args.no_spark:
                    ssecs, srows = run_spark(data, ratio, form, args.repeat)
                    agree = "" if form != "istream" else "yes" if srows == rows else "NO"
                    line += (f" {ssecs:>8.2f} {n / ssecs:>11,.0f} {ssecs / secs:>7.2f}x"
                             f" {ssecs / isecs:>7.2f}x {srows:>11} {agree:>6}")
                print(line, flush=True)
