"""PNG charts like paper 002's figures, from the bench's results.

- `window_chart` (Figure 8): per window, the average (top row) and maximum (bottom row) response
  time of each policy, one column per window distribution.
- `burst_chart` (Figure 10(a), (c)): average response time against the mean burst size per
  policy, and the largest window's maximum response time.
- `model_chart` (Figures 3 and 5): the analytical model's LWO, SWF and "alone" curves.

Results are nested dicts as the bench's JSON holds them (window and burst keys may be numbers
or their strings): ``{policy: {distribution: {window: {"avg": s, "max": s}}}}`` and
``{policy: {burst: {"avg": s, "max_largest": s}}}``. Response times are seconds; the y axes
are logarithmic, as times differ by orders of magnitude between windows and policies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cq_service.bench.charts import pyplot, save_figure
from cq_service.bench.shared_joins.model import PAPER, ModelParams, model_table

__all__ = ["burst_chart", "model_chart", "window_chart"]

WindowResults = Mapping[str, Mapping[str, Mapping[Any, Mapping[str, float]]]]
BurstResults = Mapping[str, Mapping[Any, Mapping[str, float]]]
MARKERS = {"mqt": "o", "swf": "s", "lwo": "^", "off": "x", "alone": "x"}



def _points(series: Mapping[Any, Mapping[str, float]], key: str) -> tuple[list[float], list[float]]:
    """(x, y) sorted by the numeric x, skipping points without `key`."""
    pts = sorted((float(x), v[key]) for x, v in series.items() if v.get(key) is not None)
    return [x for x, _ in pts], [y for _, y in pts]



def window_chart(results: WindowResults, path: Path, title: str = "") -> Path:
    """Average and maximum response time per window, per policy and distribution."""
    plt = pyplot()
    dists = list(dict.fromkeys(d for per in results.values() for d in per))
    if not dists:
        raise ValueError("no results to plot")
    fig, axes = plt.subplots(2, len(dists), figsize=(3.6 * len(dists), 6), squeeze=False)
    for col, dist in enumerate(dists):
        for row, (key, label) in enumerate((("avg", "average"), ("max", "maximum"))):
            ax = axes[row][col]
            for policy, per in results.items():
                if dist in per:
                    x, y = _points(per[dist], key)
                    ax.plot(x, y, marker=MARKERS.get(policy, "."), label=policy)
            ax.set_yscale("log")
            ax.set_xlabel("window (s)")
            ax.set_ylabel(f"{label} response time (s)")
            if row == 0:
                ax.set_title(dist)
    axes[0][0].legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def burst_chart(results: BurstResults, path: Path, title: str = "") -> Path:
    """Average response time (all windows) and the largest window's maximum against burst size."""
    plt = pyplot()
    if not results:
        raise ValueError("no results to plot")
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    for ax, key, label in (
        (axes[0], "avg", "average response time (s)"),
        (axes[1], "max_largest", "largest window: maximum response time (s)"),
    ):
        for policy, per in results.items():
            x, y = _points(per, key)
            ax.plot(x, y, marker=MARKERS.get(policy, "."), label=policy)
        ax.set_yscale("log")
        ax.set_xlabel("mean burst size (tuples)")
        ax.set_ylabel(label)
    axes[0].legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def model_chart(windows: Sequence[float], path: Path, params: ModelParams = PAPER) -> Path:
    """The model's average response time per window (§3.1.1 equation (1), §3.2.1 (2))."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.8))
    for name, per in model_table(windows, params).items():
        ax.plot(list(per), list(per.values()), marker=MARKERS.get(name, "."), label=name)
    ax.set_yscale("log")
    ax.set_xlabel("window (s)")
    ax.set_ylabel("average response time (s)")
    ax.set_title(f"model: t_p = {params.t_p:g} s, λ = {params.lam:g}/s, m = {params.m}")
    ax.legend(fontsize="small")
    return save_figure(fig, path)
