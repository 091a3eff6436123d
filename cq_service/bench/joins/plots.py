"""PNG charts of `cq bench joins`: per case, each setting's throughput (the median over
rounds, the bars' whiskers the slowest and fastest round) and the join operators' state peak."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cq_service.bench.charts import pyplot, save_figure
from cq_service.bench.joins.runs import SETTINGS, THROUGHPUT

__all__ = ["charts", "state_chart", "throughput_chart"]



def _cases(results: Mapping[str, Any]) -> list[str]:
    return [c for c, v in results.items() if isinstance(v, Mapping) and "checks" in v]


def _bars(ax: Any, results: Mapping[str, Any], value, whiskers=None) -> None:
    cases = _cases(results)
    settings = [s for s in SETTINGS if any(s in results[c] for c in cases)]
    width = 0.8 / max(1, len(settings))
    for k, s in enumerate(settings):
        xs = [i + (k - (len(settings) - 1) / 2) * width for i in range(len(cases))]
        ys = [value(results[c][s]) if s in results[c] else 0.0 for c in cases]
        err = None
        if whiskers is not None:
            lo_hi = [whiskers(results[c][s]) if s in results[c] else (0.0, 0.0) for c in cases]
            err = [
                [y - lo for y, (lo, _) in zip(ys, lo_hi, strict=True)],
                [hi - y for y, (_, hi) in zip(ys, lo_hi, strict=True)],
            ]
        ax.bar(xs, ys, width, yerr=err, capsize=2, label=s)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels(cases)
    ax.legend(fontsize="small")



def throughput_chart(results: Mapping[str, Any], path: Path, title: str = "") -> Path:
    """Input tuples per CPU second per case and setting (median, whiskers min–max)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))

    def span(run: Mapping[str, Any]) -> tuple[float, float]:
        vals = [r[THROUGHPUT] for r in run.get("rounds", [run])]
        return min(vals), max(vals)

    _bars(ax, results, lambda run: run[THROUGHPUT], span)
    ax.set_ylabel("input tuples per CPU second")
    ax.set_title(title or "throughput")
    return save_figure(fig, path)


def state_chart(results: Mapping[str, Any], path: Path, title: str = "") -> Path:
    """The join operators' state peak (rows) per case and setting, log scale."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    _bars(ax, results, lambda run: run["peak_state_rows"])
    ax.set_yscale("log")
    ax.set_ylabel("state peak (rows)")
    ax.set_title(title or "state")
    return save_figure(fig, path)


def charts(results: Mapping[str, Any], folder: Path, scale: str) -> list[Path]:
    """Both charts under `folder`."""
    return [
        throughput_chart(results, folder / "joins-throughput.png", f"throughput ({scale})"),
        state_chart(results, folder / "joins-state.png", f"join state peak ({scale})"),
    ]
