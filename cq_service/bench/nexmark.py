"""`cq bench nexmark`: q0-q8 on our engine, Spark Structured Streaming and PyFlink, side by side.

One run generates the input once (Parquet, `cq nexmark generate`), then for every query runs
every engine as a fresh child process on the same files (`cq_nexmark.py` for ours, `peers/*.py`
for the others, all with the same command line), `repeat` times, and keeps the medians of two
times, taken between the same boundaries for every engine: the whole process (spawn to exit,
start-up included) and in-process (reported by the child: from defining the query, i.e. its
planning, compilation or code generation and the opening of its sources, to its last output
written; the interpreter, JVM and session or cluster already started; no engine gets a warm-up
run). Events/s divides the events of the streams the query reads (`INPUTS`) by each. The I/O
floor reads the query's input files with pyarrow and writes our engine's result, nothing else.
Latency is ours only: a real-time replay of the generator at half the rate just measured
(`cq_nexmark --pace`). Memory is the peak resident set of the engine's process tree. Every
peer's comparable result must equal ours (`comparable.py`): any difference fails the run.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from cq_service.bench.comparable import compare, restrict
from cq_service.bench.nexmark_model import ENGINES, INPUTS, QUERIES, Cell, Row
from cq_service.bench.procmem import run_measured
from cq_service.bench.report import charts, table
from cq_service.io import nexmark

__all__ = ["ENGINES", "QUERIES", "events_read", "measure_latency", "run_benchmark", "save"]

_PEERS = Path(__file__).resolve().parent / "peers"
_REPO = Path(__file__).resolve().parents[2]


def _command(engine: str) -> list[str]:
    if engine == "cq":
        return [sys.executable, "-m", "cq_service.bench.cq_nexmark"]
    if engine == "spark":
        return [sys.executable, str(_PEERS / "spark_nexmark.py")]
    flink_python = os.environ.get("CQ_FLINK_PYTHON") or str(_REPO / ".venv-flink" / "bin" / "python")
    return [flink_python, str(_PEERS / "flink_nexmark.py")]


def _run(engine: str, args: list[str], timeout: float) -> tuple[dict, int, float]:
    """The child's JSON line, its process tree's peak RSS and its wall time, spawn to exit."""
    cmd = _command(engine) + args
    if not Path(cmd[0]).exists():
        raise RuntimeError(f"{engine}: {cmd[0]} is missing (make bench-deps installs the peers)")
    done = run_measured(cmd, timeout=timeout)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{engine} {' '.join(args)} failed ({done.returncode}):\n{tail}")
    return json.loads(lines[-1]), done.peak_rss, done.wall


def _io_floor(data: Path, query: str, result: Path, work: Path) -> float:
    start = time.perf_counter()
    for kind in INPUTS[query]:
        pq.read_table(data / f"{kind}.parquet")
    pq.write_table(pq.read_table(result), work / "floor.parquet")
    return time.perf_counter() - start


def events_read(data: Path, query: str) -> int:
    """The events of the streams `query` reads, in the generated files of `data`."""
    return sum(pq.ParquetFile(data / f"{kind}.parquet").metadata.num_rows for kind in INPUTS[query])


def generate_data(folder: Path, events: int, seed: int) -> Path:
    """The input files, made once per (events, seed) and kept."""
    data = folder / f"data-{events}-{seed}"
    stamp = data / "complete"
    if not stamp.exists():
        shutil.rmtree(data, ignore_errors=True)
        nexmark.write(data, events, seed=seed)
        stamp.write_text("")
    return data


def run_benchmark(
    *,
    events: int,
    queries: tuple[str, ...] = QUERIES,
    engines: tuple[str, ...] = ENGINES,
    repeat: int = 1,
    latency_seconds: float = 5.0,
    seed: int = 0,
    work: Path,
    timeout: float = 1800.0,
    progress=None,
    on_row=None,
) -> list[Row]:
    """Run the benchmark; `progress(description)` is called before each step and
    `on_row(rows so far)` after each query (the CLI saves the results so far)."""
    work.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _d: None)
    say(f"generating {events:,} events")
    data = generate_data(work, events, seed)
    half = generate_data(work, events // 2, seed)
    bids = pq.read_table(data / "bid.parquet", columns=["dateTime"])["dateTime"]
    last_bid = int(pc.max(bids).as_py()) if len(bids) else 0
    rows = []
    for q in queries:
        row = Row(q, events_read=events_read(data, q))
        results = {}
        for engine in engines:
            cell = Cell()
            for r in range(repeat):
                say(f"{q} on {engine} ({r + 1}/{repeat})")
                out = work / f"{engine}-{q}.parquet"
                out.unlink(missing_ok=True)
                info, rss, wall = _run(
                    engine, ["--data", str(data), "--query", q, "--out", str(out)], timeout
                )
                if not info.get("supported", True):
                    cell = Cell(supported=False, note=info.get("note", ""))
                    break
                cell.seconds.append(float(info["seconds"]))
                cell.process_seconds.append(wall)
                cell.peak_rss = max(cell.peak_rss or 0, rss)
                cell.rows = info.get("rows")
                cell.note = info.get("note", "")
                cell.latency_ms = info.get("latency_ms")
                cell.state_bytes = info.get("state_bytes")
                if r == 0:
                    results[engine] = restrict(q, pq.read_table(out), last_bid)
            if cell.supported:
                cell.settle(row.events_read)
            row.cells[engine] = cell
        if "cq" in results:
            floor = [_io_floor(data, q, work / f"cq-{q}.parquet", work) for _ in range(repeat)]
            row.floor_events_per_s = row.events_read / statistics.median(floor)
            for engine, table in results.items():
                if engine != "cq":
                    problem = compare(q, engine, results["cq"], table)
                    row.cells[engine].agrees = problem is None
                    if problem:
                        row.cells[engine].note = (row.cells[engine].note + " " + str(problem)).strip()
            cq = row.cells["cq"]
            # Memory bounded by the windows, not the run: the same query on half the input.
            say(f"{q} on cq, half the input (memory)")
            info, _, _ = _run(
                "cq",
                ["--data", str(half), "--query", q, "--out", str(work / f"cq-{q}-half.parquet")],
                timeout,
            )
            cq.half_state_bytes = info.get("state_bytes")
            if latency_seconds > 0:
                measure_latency(row, events, latency_seconds, work, timeout, say)
        rows.append(row)
        if on_row:
            on_row(rows)
    return rows


def measure_latency(
    row: Row, events: int, seconds: float, work: Path, timeout: float = 1800.0, say=None
) -> None:
    """Our engine's p50/p99 latency for `row`'s query: a real-time replay at half the rate
    measured for it in-process, for `seconds` or `events` events, whichever is fewer. The pace
    counts generated events of all kinds (the replay's unit), not only those the query reads."""
    cq = row.cells["cq"]
    if not cq.seconds:
        return
    pace = events / statistics.median(cq.seconds) / 2
    # At most the benchmark's own input: a fast query replays it in less time.
    n = min(events, max(10_000, int(pace * seconds)))
    # The replay spans as much event time as the full input does (windows, auction
    # lifetimes), with fewer events in it.
    rate = nexmark.DEFAULT_RATE * n / events
    if say:
        say(f"{row.query} latency on cq at {pace:,.0f} events/s")
    info, _, _ = _run(
        "cq",
        ["--query", row.query, "--events", str(n), "--pace", str(pace), "--rate", str(rate),
         "--out", str(work / f"cq-{row.query}-paced.parquet")],
        timeout,
    )
    cq.latency_ms = info.get("latency_ms")
    if cq.latency_ms is not None:
        cq.latency_ms["pace"] = pace


def save(rows: list[Row], folder: Path, meta: dict) -> None:
    """nexmark.json (everything), nexmark.md (the table) and the charts, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nexmark.json").write_text(
        json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=2) + "\n"
    )
    (folder / "nexmark.md").write_text(table(rows, meta))
    charts(rows, folder)
