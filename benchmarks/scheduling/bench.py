"""The Chain paper's experiments on the real engine (paper 000 §6; issue 5).

For each query shape in shapes/, elements arrive in wall-clock time following the ON/OFF
model (arrivals.py) at a mean load below the engine's measured capacity for that shape, with
bursts well above it. Each policy runs the same arrivals; the executor records total queue
memory after every step, and sinks record each result's latency. The run is repeated and
medians are reported; one run per policy is drawn as memory over time.

    .venv/bin/python benchmarks/scheduling/bench.py            # every shape, 3 repeats
    .venv/bin/python benchmarks/scheduling/bench.py --shape 2 --repeats 1

Writes benchmarks/scheduling/results/{shape}.png, results.md and results.json; with
`--shares`, chain_share at each share of FIFO steps too, and shape{N}-tradeoff.png: peak
memory against p99 latency, one point per share, Chain and FIFO marked.

    .venv/bin/python benchmarks/scheduling/bench.py --shape 1 --shares 0.05,0.1,0.25,0.5
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from cq_service.bench.paced import Arrivals, Run, run_shape

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from arrivals import on_off_arrivals  # noqa: E402

SHAPES = {
    "1": ("1_two_operators.yaml", ["S"]),
    "2": ("2_four_operators.yaml", ["S"]),
    "3": ("3_relation_join.yaml", ["S"]),
    "4": ("4_window_join.yaml", ["S", "T"]),
    "5": ("5_mixed.yaml", ["S"]),
}
POLICIES = ["fifo", "round_robin", "greedy", "chain"]
LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
PAYLOAD = 80  # characters per element's payload


def stream_table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    chars = LETTERS[rng.integers(0, 26, size=n * PAYLOAD)]
    offsets = np.arange(0, PAYLOAD * n + 1, PAYLOAD, dtype=np.int32)
    payload = pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes())]
    )
    return pa.table({
        "k": pa.array(rng.integers(0, 10_000, n)),
        "v": pa.array(rng.integers(0, 1_000, n)),
        "payload": payload,
    })


def arrivals_for(streams: list[str], n: int, at: list[np.ndarray]) -> dict[str, Arrivals]:
    out = {}
    for k, (name, times) in enumerate(zip(streams, at, strict=True)):
        ts = np.floor(times * 1e6).astype(np.int64)  # event time = arrival time, in µs
        out[name] = Arrivals(stream_table(n, 100 + k), times, ts)
    return out


def capacity(shape: Path, streams: list[str], n: int = 100_000, tries: int = 2) -> float:
    """Elements per second (all streams together) the engine sustains on this shape when work
    is waiting: `n` elements per stream queued at once, run under FIFO; the best of `tries`
    runs (noise only ever slows a run down). Real-time arrivals come in smaller batches, each
    paying the engine's fixed cost per run, so the engine is busier at a given rate than this
    suggests: about half busy at a "load" of 0.5 on these shapes (the `busy` column)."""
    at = [np.zeros(n) for _ in streams]
    arr = arrivals_for(streams, n, at)
    for a in arr.values():
        a.ts = np.arange(n, dtype=np.int64)
    return max(n * len(streams) / run_shape(shape, arr, "fifo").seconds for _ in range(tries))


def summary(runs: list[Run]) -> dict[str, float]:
    return {
        "peak_kib": statistics.median(r.peak_bytes for r in runs) / 1024,
        "average_kib": statistics.median(r.average_bytes for r in runs) / 1024,
        "latency_p50_ms": statistics.median(r.latency.quantile(0.5) for r in runs) * 1e3,
        "latency_p99_ms": statistics.median(r.latency.quantile(0.99) for r in runs) * 1e3,
        "seconds": statistics.median(r.seconds for r in runs),
        "utilisation": statistics.median(r.utilisation for r in runs),
        "results": runs[0].results,
    }


def plot(path: Path, title: str, runs: dict[str, Run]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for name, run in runs.items():
        tr = np.asarray(run.trace)
        if len(tr):
            ax.plot(tr[:, 0], tr[:, 2] / 1024, label=name, linewidth=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("total queue memory (KiB)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def curve(policies: dict, shares: list[float]) -> list[tuple[float, dict]]:
    """(share, medians) from Chain (share 0) through each share to FIFO (share 1)."""
    points = [(0.0, policies["chain"])]
    points += [(f, policies[f"chain_share({f:g})"]) for f in sorted(shares)]
    return [*points, (1.0, policies["fifo"])]


def plot_tradeoff(path: Path, title: str, policies: dict, shares: list[float]) -> None:
    """Peak memory against p99 and against p50 latency (medians): chain_share at each share,
    joined in order of the share, with Chain and FIFO (shares 0 and 1 by definition) marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = curve(policies, shares)
    ys = [p["peak_kib"] / 1024 for _, p in points]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, q in zip(axes, ("p99", "p50"), strict=True):
        xs = [p[f"latency_{q}_ms"] for _, p in points]
        ax.plot(xs, ys, "o-", color="tab:blue", label="chain_share (share of FIFO steps)")
        for (f, _), x, y in zip(points, xs, ys, strict=True):
            ax.annotate(f"{f:g}", (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
        ax.plot(xs[0], ys[0], "s", color="tab:green", markersize=9, label="chain")
        ax.plot(xs[-1], ys[-1], "D", color="tab:red", markersize=8, label="fifo")
        for name, mark in (("greedy", "^"), ("round_robin", "v")):
            if name in policies:
                ax.plot(policies[name][f"latency_{q}_ms"], policies[name]["peak_kib"] / 1024,
                        mark, color="grey", label=name)
        ax.set_xlabel(f"{q} latency (ms)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("peak queue memory (MiB)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{title}: memory vs latency (medians)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", action="append", help="shape number (default: all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0,
                    help="mean duration of the arrivals (elements = mean rate × seconds)")
    ap.add_argument("--load", type=float, default=0.5, help="mean rate / capacity")
    ap.add_argument("--burst", type=float, default=1.5, help="one flow's rate / capacity")
    ap.add_argument("--flow", type=float, default=0.02,
                    help="shortest flow (burst) in seconds: the Pareto scale")
    ap.add_argument("--bounds", default="", help="chain_bounded bounds in ms, e.g. 5,20,50")
    ap.add_argument("--shares", default="",
                    help="chain_share's shares of FIFO steps, e.g. 0.05,0.1,0.25,0.5")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results_path = args.out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    bounds = [float(b) for b in args.bounds.split(",") if b]
    shares = [float(f) for f in args.shares.split(",") if f]
    for key in args.shape or list(SHAPES):
        file, streams = SHAPES[key]
        shape = HERE / "shapes" / file
        cap = capacity(shape, streams)
        rate = args.load * cap / len(streams)
        elements = int(rate * args.seconds)  # per stream
        at = [
            on_off_arrivals(elements, rate, flow_rate=args.burst * cap / len(streams),
                            min_duration=args.flow, seed=11 + k)
            for k in range(len(streams))
        ]
        arr = arrivals_for(streams, elements, at)
        policies = [(p, None, None) for p in POLICIES]
        policies += [("chain_bounded", b / 1e3, None) for b in bounds]
        policies += [("chain_share", None, f) for f in shares]
        runs: dict[str, list[Run]] = {}
        for rep in range(args.repeats):
            for p, bound, share in policies:
                r = run_shape(shape, arr, p, bound=bound, share=share)
                runs.setdefault(r.policy, []).append(r)
                print(f"shape {key} rep {rep} {r.policy:>18}: peak {r.peak_bytes / 1024:9.1f} KiB  "
                      f"avg {r.average_bytes / 1024:8.1f} KiB  p99 {r.latency.quantile(0.99) * 1e3:8.2f} ms  "
                      f"{r.seconds:5.1f} s", flush=True)
        entry = {
            "shape": file,
            "capacity_per_s": cap,
            "mean_rate_per_s": rate * len(streams),
            "elements": elements * len(streams),
            "shortest_flow_s": args.flow,
            "repeats": args.repeats,
            "policies": {name: summary(rs) for name, rs in runs.items()},
        }
        results[key] = entry
        plot(args.out / f"shape{key}.png", f"shape {key}: {file[2:-5].replace('_', ' ')}",
             {name: rs[0] for name, rs in runs.items() if "(" not in name})
        if shares:
            for f, p in curve(entry["policies"], shares):
                print(f"shape {key} share {f:4g}: peak {p['peak_kib']:9.1f} KiB  "
                      f"p99 {p['latency_p99_ms']:8.2f} ms  p50 {p['latency_p50_ms']:8.2f} ms "
                      "(medians)", flush=True)
            plot_tradeoff(args.out / f"shape{key}-tradeoff.png",
                          f"shape {key}: {file[2:-5].replace('_', ' ')}", entry["policies"], shares)
    results["machine"] = f"{platform.machine()}, {platform.python_version()}, {time.strftime('%Y-%m-%d')}"
    results_path.write_text(json.dumps(results, indent=2))
    write_table(args.out / "results.md", results)


def write_table(path: Path, results: dict) -> None:
    lines = ["| shape | policy | peak KiB | average KiB | p50 ms | p99 ms | busy | vs best of FIFO/greedy (peak) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for key in sorted(k for k in results if k in SHAPES):
        pol = results[key]["policies"]
        best = min(pol[p]["peak_kib"] for p in ("fifo", "greedy") if p in pol)
        for name, s in pol.items():
            lines.append(
                f"| {key} | {name} | {s['peak_kib']:.1f} | {s['average_kib']:.1f} | "
                f"{s['latency_p50_ms']:.2f} | {s['latency_p99_ms']:.2f} | "
                f"{s.get('utilisation', float('nan')):.2f} | "
                f"{(s['peak_kib'] / best - 1) * 100:+.0f}% |"
            )
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
