"""PNG charts of `cq bench filters` (like the thesis' figures in §4.7).

- `cost_chart`: evaluations per tuple against n, one line per order.
- `reconvergence_chart`: evaluations per tuple per block over the run, one line per order,
  with the optimum of each phase and the changes marked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cq_service.bench.charts import pyplot, save_figure

__all__ = ["cost_chart", "reconvergence_chart"]

MARKERS = {
    "a-greedy": "o",
    "sweep": "s",
    "independent": "^",
    "local-swaps": "v",
    "static": "x",
    "written": "+",
    "optimum": "*",
}




def cost_chart(by_n: Mapping[Any, Mapping[str, Any]], path: Path, title: str = "") -> Path:
    """Cost per tuple against n (the engine's whole-predicate ``static`` left out: n)."""
    if not by_n:
        raise ValueError("no results to plot")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ns = sorted(by_n, key=int)
    orders = [o for o in by_n[ns[0]]["runs"] if o != "static"]
    for o in orders:
        ax.plot(
            [int(n) for n in ns],
            [by_n[n]["runs"][o]["cost_per_tuple"] for n in ns],
            marker=MARKERS.get(o, "."),
            label=o,
        )
    ax.set_xlabel("filters n")
    ax.set_ylabel("evaluations per tuple")
    ax.set_title(title or "cost per tuple (Γ = 2, selectivity 50%)")
    ax.legend()
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def reconvergence_chart(rc: Mapping[str, Any], path: Path, title: str = "") -> Path:
    """Cost per tuple per block around the permutations."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    block = rc["block"]
    for o, r in rc["runs"].items():
        xs = [(b + 0.5) * block for b in range(len(r["blocks"]))]
        ax.plot(xs, r["blocks"], label=o, marker=MARKERS.get(o, "."), markersize=3)
    xs = [(b + 0.5) * block for b in range(len(rc["optimum_blocks"]))]
    ax.plot(xs, rc["optimum_blocks"], label="phase optimum", color="black", linestyle="--")
    for k in range(1, len(rc["phases"])):
        ax.axvline(k * rc["period"], color="grey", linestyle=":")
    ax.set_xlabel("tuples")
    ax.set_ylabel("evaluations per tuple")
    ax.set_title(title or f"re-convergence, n = {rc['n']} (selectivities permuted)")
    ax.legend()
    ax.grid(alpha=0.3)
    return save_figure(fig, path)
