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
    """Cost per tuple against n (the engine's whole-predicate ``static`` left out: n); with
    several placements, the mean with bars from the least to the largest."""
    if not by_n:
        raise ValueError("no results to plot")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ns = sorted(by_n, key=int)
    orders = [o for o in by_n[ns[0]]["runs"] if o != "static"]
    for i, o in enumerate(orders):
        xs = [int(n) + (i - len(orders) / 2) * 0.03 for n in ns]  # bars side by side
        ys = [by_n[n]["runs"][o]["cost_per_tuple"] for n in ns]
        spreads = [by_n[n]["runs"][o].get("spread") for n in ns]
        err = None
        if all(spreads):
            err = [
                [y - s["min"] for y, s in zip(ys, spreads, strict=True)],
                [s["max"] - y for y, s in zip(ys, spreads, strict=True)],
            ]
        ax.errorbar(xs, ys, yerr=err, marker=MARKERS.get(o, "."), capsize=2, label=o)
    ax.set_xlabel("filters n")
    ax.set_ylabel("evaluations per tuple")
    k = len(by_n[ns[0]].get("placements", [])) or 1
    ax.set_title(title or f"cost per tuple (Γ = 2, selectivity 50%), mean of {k}, min-max")
    ax.legend()
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def reconvergence_chart(rc: Mapping[str, Any], path: Path, title: str = "") -> Path:
    """Left: each order's cost over the phase optimum's per block (median over seeds, the
    band from least to largest); right: tuples to re-converge after the first change per
    seed (dots; "never" at the top) and their median (bar)."""
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [2, 1]})
    block = rc["block"]
    for o, r in rc["runs"].items():
        xs = [(b + 0.5) * block for b in range(len(r["ratios"]))]
        (line,) = ax.plot(xs, r["ratios"], label=o, marker=MARKERS.get(o, "."), markersize=2)
        if "ratios_min" in r:
            ax.fill_between(
                xs, r["ratios_min"], r["ratios_max"], color=line.get_color(), alpha=0.12
            )
    ax.axhline(1.0, color="black", linestyle="--", label="phase optimum")
    ax.axhline(rc.get("within", 1.2), color="grey", linestyle="-.", label="within")
    for k in range(1, len(rc["phases"])):
        ax.axvline(k * rc["period"], color="grey", linestyle=":")
    ax.set_xlabel("tuples")
    ax.set_ylabel("cost / phase optimum (per block)")
    seeds = len(rc.get("seeds", [rc]))
    ax.set_title(title or f"re-convergence, n = {rc['n']}, {seeds} seed(s): median, min-max")
    ax.set_ylim(0.9, 2.0)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    orders = list(rc["runs"])
    top = rc["period"]
    for i, o in enumerate(orders):
        r = rc["runs"][o]
        values = (r.get("reconverge_spread") or [{"values": r["tuples_to_reconverge"]}])[0][
            "values"
        ]
        ys = [top if v is None else v for v in values]
        bx.scatter([i] * len(ys), ys, marker=MARKERS.get(o, "."), zorder=3)
        med = r["tuples_to_reconverge"][0]
        bx.bar(i, top if med is None else med, color="lightgrey", width=0.6)
    bx.set_xticks(range(len(orders)), orders, rotation=20, fontsize=8)
    bx.set_yscale("log")
    bx.set_ylabel(f"tuples to within {rc.get('within', 1.2):g}x (top: never)")
    bx.set_title("after the change: per seed, median")
    bx.grid(alpha=0.3, axis="y")
    return save_figure(fig, path)
