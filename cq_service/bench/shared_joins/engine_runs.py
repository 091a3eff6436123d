"""Paper 002's experiments on the real engine: `cq bench shared-joins`.

Each run writes the seven-query pipeline (pipeline.py) for one policy, plans it as `cq run`
does (the shared join, or each query alone for ``off``) and plays the workload (workload.py)
into the engine in wall-clock time (bench/paced.py): the preload of w_max enters first, and
once the engine has taken it in the measured tuples arrive at their own times divided by
`speedup` (the time scale printed). A result's response time is the wall-clock time from the
arrival of the tuple that completed it (the later of its pair) to its sink, as in the paper (§3); the
preload's results do not count. Per query: average and maximum response time; per run: the
peak of the operators' state (join buffers, windows, synopses; not queues). The executor
runs its FIFO policy (the oldest input first): the paper schedules nothing but the shared
join, whose own policy orders its work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from cq_service.bench.paced import Arrivals, run_shape
from cq_service.bench.shared_joins.pipeline import pipeline_yaml, query_name
from cq_service.bench.shared_joins.report import mean_of_averages
from cq_service.bench.shared_joins.workload import Workload, generate
from cq_service.compiler import run_plan

__all__ = ["POLICIES", "bursts", "by_window", "run_one"]

POLICIES = ("mqt", "swf", "lwo", "off")
POLL_S = 0.02  # a source is read once its oldest tuple has waited this long (bench/paced.py)
HEARTBEAT_S = 0.04  # a quiet stream's heartbeat, this often


def arrivals(w: Workload, speedup: float) -> dict[str, Arrivals]:
    """Each stream's tuples (columns k, v) and arrival times in seconds of the run: the
    preload is a warm-up (bench/paced.py), the rest arrives `speedup` times faster than in
    the paper."""
    out = {}
    per_second = w.scale.units_per_second * speedup
    for name, s in w.streams.items():
        at = np.where(s.ts < w.measure_from, -1.0, (s.ts - w.measure_from) / per_second)
        out[name] = Arrivals(pa.table({"k": s.k, "v": s.v}), at, s.ts, w.measure_from,
                             per_second)
    return out


def run_one(
    w: Workload, policy: str, folder: Path, speedup: float, executor: str = "fifo", *,
    poll_s: float = POLL_S, heartbeat_s: float = HEARTBEAT_S,
) -> dict:
    """One policy on one workload: {"windows": {seconds: {"avg", "max", "results"}},
    "peak_state_bytes", "peak_queue_bytes", "seconds"} (times in seconds)."""
    folder.mkdir(parents=True, exist_ok=True)
    w.write_csv(folder)
    path = folder / f"{policy}.yaml"
    path.write_text(pipeline_yaml(w.windows, w.window_units, policy, sink="blackhole",
                                  time_unit=w.scale.time_unit))
    run = run_shape(path, arrivals(w, speedup), executor, plan=run_plan, poll_s=poll_s,
                    heartbeat_s=heartbeat_s)
    windows = {}
    for seconds in w.windows:
        lat = run.latencies[query_name(seconds)]
        windows[seconds] = {"avg": lat.mean, "max": lat.max, "results": lat.count}
    return {"windows": windows, "peak_state_bytes": run.peak_state_bytes,
            "peak_queue_bytes": run.peak_bytes, "seconds": run.seconds}


def by_window(
    distributions: Sequence[str], policies: Sequence[str], folder: Path, *, rate: float,
    new_tuples: int, speedup: float, say: Callable[[str], None] = lambda _: None,
) -> dict[str, dict[str, dict]]:
    """Experiment 1 (§5.1): {policy: {distribution: run_one's result}}."""
    out: dict[str, dict[str, dict]] = {p: {} for p in policies}
    for dist in distributions:
        w = generate(dist, rate=rate, new_tuples=new_tuples, seed=1)
        say(f"{dist}: {w.describe()}; played {speedup:g}x real time")
        for p in policies:
            out[p][dist] = run_one(w, p, folder / dist, speedup)
            r = out[p][dist]
            say(f"  {p:4}: average response {mean_of_averages(r['windows']) * 1e3:8.2f} ms, "
                f"state peak {r['peak_state_bytes'] / 2**20:6.1f} MiB")
    return out


def bursts(
    sizes: Sequence[float], policies: Sequence[str], folder: Path, *, rate: float,
    new_tuples: int, speedup: float, max_burst: int | None = 1000,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, dict[float, dict]]:
    """Experiment 2 (§5.2, Small-Large windows, ON/OFF arrivals): {policy: {mean burst:
    {"avg": mean over queries of their average, "max_largest": the largest window's max}}}."""
    out: dict[str, dict[float, dict]] = {p: {} for p in policies}
    for size in sizes:
        w = generate("small-large", rate=rate, new_tuples=new_tuples, mean_burst=size,
                     max_burst=max_burst, seed=2)
        say(f"burst {size:g}: {w.describe()}")
        for p in policies:
            r = run_one(w, p, folder / f"burst{size:g}", speedup)
            out[p][float(size)] = {"avg": mean_of_averages(r["windows"]),
                                   "max_largest": r["windows"][w.windows[-1]]["max"]}
            say(f"  {p:4}: average {out[p][float(size)]['avg'] * 1e3:8.2f} ms, largest window's "
                f"max {out[p][float(size)]['max_largest'] * 1e3:8.2f} ms")
    return out
