"""`cq bench shared-joins`'s verdicts and text: the paper's claims (§5), checked on a run.

Each check compares figures measured in the same run; none is asserted by the bench. A check
that does not hold is printed as such: the README reports what was seen.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

__all__ = ["checks", "mean_of_averages", "text"]

FLAT = 1.5  # LWO is "flat" when no window's average exceeds another's by more than this factor
BURST = 4.0  # the mean burst size at which the paper's 50% claim is checked (issue 23)


def mean_of_averages(windows: Mapping[Any, Mapping[str, float]]) -> float:
    """The mean over queries (with results) of their average response time."""
    avgs = [v["avg"] for v in windows.values() if v["results"]]
    return statistics.fmean(avgs) if avgs else 0.0


def checks(by_window: Mapping[str, Mapping[str, dict]], bursts: Mapping[str, Mapping[float, dict]]
           ) -> dict[str, bool]:
    """The Done-when orderings: {claim: held}. `by_window[policy][distribution]` is a run
    (engine_runs.run_one), `bursts[policy][mean burst]` {"avg", "max_largest"}."""
    out: dict[str, bool] = {}
    dists = list(by_window.get("mqt", {}))
    for dist in dists:
        avg = {p: mean_of_averages(r[dist]["windows"]) for p, r in by_window.items() if dist in r}
        shared = {p: v for p, v in avg.items() if p != "off"}
        out[f"{dist}: MQT best on average"] = min(shared, key=shared.__getitem__) == "mqt"
        if "lwo" in by_window:
            lwo = [v["avg"] for v in by_window["lwo"][dist]["windows"].values() if v["results"]]
            out[f"{dist}: LWO flat (max/min average ≤ {FLAT:g})"] = (
                bool(lwo) and max(lwo) <= FLAT * max(min(lwo), 1e-9)
            )
        if "swf" in by_window:
            swf = list(by_window["swf"][dist]["windows"].values())
            out[f"{dist}: SWF favours small windows"] = swf[0]["avg"] < swf[-1]["avg"]
        if "off" in by_window:
            alone = by_window["off"][dist]["peak_state_bytes"]
            out[f"{dist}: shared state below the queries alone"] = all(
                by_window[p][dist]["peak_state_bytes"] < alone for p in shared
            )
    if BURST in bursts.get("mqt", {}) and BURST in bursts.get("lwo", {}):
        m, lw = bursts["mqt"][BURST]["avg"], bursts["lwo"][BURST]["avg"]
        out[f"burst {BURST:g}: MQT's average ≥ 50% below LWO's"] = m <= 0.5 * lw
    if bursts.get("mqt") and bursts.get("swf"):
        top = max(bursts["mqt"])
        out[f"burst {top:g}: largest window's max lower under MQT than SWF"] = (
            bursts["mqt"][top]["max_largest"] < bursts["swf"][top]["max_largest"]
        )
    return out


def text(by_window: Mapping[str, Mapping[str, dict]], bursts: Mapping[str, Mapping[float, dict]],
         verdicts: Mapping[str, bool]) -> str:
    """Tables: per distribution the mean of the queries' averages (ms), the largest window's
    average and maximum (ms) and the state peak (MiB); per burst size the average and the
    largest window's maximum; then the checks."""
    lines = [f"{'distribution':14} {'plan':5} {'avg ms':>8} {'w_max avg':>10} {'w_max max':>10} "
             f"{'state MiB':>10}"]
    for policy, per in by_window.items():
        for dist, run in per.items():
            windows = run["windows"]
            top = windows[max(windows, key=float)]
            lines.append(
                f"{dist:14} {policy:5} {mean_of_averages(windows) * 1e3:8.1f} "
                f"{top['avg'] * 1e3:10.1f} {top['max'] * 1e3:10.1f} "
                f"{run['peak_state_bytes'] / 2**20:10.1f}"
            )
    if bursts:
        lines.append("")
        lines.append(f"{'mean burst':>10} {'plan':5} {'avg ms':>8} {'w_max max ms':>13}")
        for policy, per in bursts.items():
            for size, r in per.items():
                lines.append(f"{float(size):10g} {policy:5} {r['avg'] * 1e3:8.1f} "
                             f"{r['max_largest'] * 1e3:13.1f}")
    lines.append("")
    lines += [f"{'holds' if ok else 'DOES NOT HOLD'}: {claim}" for claim, ok in verdicts.items()]
    return "\n".join(lines)
