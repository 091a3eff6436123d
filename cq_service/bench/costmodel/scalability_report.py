"""The scalability experiment's samples and report: the series sampled over application time,
the summary of a run, its text, its JSON and its chart (see `scalability`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cq_service.bench.costmodel.querymix import RATE_PER_MIN, Timeline
from cq_service.stats import human_bytes

__all__ = ["REJECTIONS_SHOWN", "Series", "as_json", "chart", "summary", "text"]


@dataclass
class Series:
    """Samples over application time (ms): measured and estimated bytes, queries running,
    queries rejected so far."""

    t: list[int] = field(default_factory=list)
    measured: list[float] = field(default_factory=list)
    estimated: list[float] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)

    def add(self, t: int, measured: float, estimated: float, running: int, rejected: int) -> None:
        self.t.append(t)
        self.measured.append(measured)
        self.estimated.append(estimated)
        self.running.append(running)
        self.rejected.append(rejected)

    def to_json(self) -> dict[str, list]:
        return dict(self.__dict__)



def summary(r: dict[str, Any]) -> dict[str, Any]:
    """The numbers the report gives: peaks against the budget, queries, changes, timings."""
    s = r["series"]
    t = np.asarray(s["t"], dtype=float)
    m = np.asarray(s["measured"], dtype=float)
    budget, reserve = r["budget"], r["reserve"]
    tl = Timeline(**r["timeline"])
    burst = tl.ms(tl.burst_at)
    peak = int(np.argmax(m)) if len(m) else 0
    out: dict[str, Any] = {
        "max_bytes": float(m.max()) if len(m) else 0.0,
        "max_at": float(t[peak]) if len(m) else 0.0,
        "max_over_budget": float(m.max() / budget) if len(m) else 0.0,
        "max_over_budget_plus_reserve": float(m.max() / (budget + reserve)) if len(m) else 0.0,
        "within_budget_plus_reserve": bool((m <= budget + reserve).all()),
        "samples_over_budget": int((m > budget).sum()),
        "samples": len(m),
        "arrived": sum(n for _, n in r["arrivals"]),
        "running_at_end": s["running"][-1] if s["running"] else 0,
        "rejected": len(r["rejections"]),
        "rejected_at_burst": sum(1 for x in r["rejections"] if x["at"] == burst),
        "settings_checked": r["checks"]["settings_checked"],
        "settings_outside": len(r["checks"]["outside"]),
        "changes": r["changes"],
        "wall_seconds": r["wall_seconds"],
    }
    if r["mode"] == "engine":
        out["tick_seconds"] = _stats(r["tick_seconds"])
        out["deploy_seconds"] = _stats(r["deploy_seconds"])
    else:
        out["decide_seconds"] = _stats([x["decide"] for x in r["rounds"]])
        out["first_decide"] = r["rounds"][0]["decide"] if r["rounds"] else 0.0
        out["largest_decide"] = max(
            (x for x in r["rounds"]), key=lambda x: x["queries"], default={"queries": 0}
        )
    return out


def _stats(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"n": 0, "mean": 0.0, "max": 0.0, "total": 0.0}
    return {
        "n": len(xs),
        "mean": float(np.mean(xs)),
        "max": float(max(xs)),
        "total": float(sum(xs)),
    }


def as_json(result: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`result` as stored, bytes rounded to whole bytes."""
    out = {}
    for mode, r in result.items():
        series = {
            k: [round(x) for x in v] if k in ("measured", "estimated") else v
            for k, v in r["series"].items()
        }
        out[mode] = {**r, "series": series}
    return out


def _minutes(ms: float) -> str:
    s = ms / 1000
    return f"{s / 60:g} min" if s >= 60 and s % 60 == 0 else f"{s:g} s"


def text(result: dict[str, dict[str, Any]]) -> str:
    """The report: each mode's setup, its peak memory against the budget, the queries admitted
    and rejected (with reasons), the changes and the manager's time."""
    lines = ["Scalability (brief-costmodel §5, Fig. 12): memory over time against the budget"]
    for mode, r in result.items():
        lines += ["", *_mode_text(mode, r)]
    return "\n".join(lines)


def _mode_text(mode: str, r: dict[str, Any]) -> list[str]:
    tl = Timeline(**r["timeline"])
    s = r["summary"]
    kinds = ", ".join(f"{k} {n}" for k, n in r["kinds"].items())
    trickle = [a for a in r["arrivals"][1:] if a[1] == tl.trickle]
    title = (
        "engine mode (the worker, pipeline file → deploy → admission → manager → adjustments)"
        if mode == "engine"
        else "model mode (adaptive.manager alone, memory from the model with delays)"
    )
    lines = [
        f"{title}, times × {tl.scale:g}, seed {r['seed']}",
        f"  queries: {tl.initial:,} at 0, {tl.trickle} every {_minutes(tl.ms(tl.trickle_every))} "
        f"from {_minutes(tl.ms(tl.trickle_from))} ({len(trickle)} times), {tl.burst} at "
        f"{_minutes(tl.ms(tl.burst_at))}, end {_minutes(tl.ms(tl.end))}; manager every "
        f"{_minutes(tl.ms(tl.manage_every))}",
        f"  mix: {kinds}; {r['nested_loops']:.0%} of joins nested-loop; {r['streams']} Poisson "
        f"streams at {RATE_PER_MIN[0]:g}–{RATE_PER_MIN[1]:g} tuples/min",
        f"  budget {human_bytes(r['budget'])} = {r['share']:.0%} of the "
        f"{human_bytes(r['need_full'])} the initial queries need at full precision (model; "
        f"{human_bytes(r['need_least'])} at their minimum settings); reserve "
        f"{human_bytes(r['reserve'])}, target {human_bytes(r['budget'] - r['reserve'])}",
        f"  {'measured' if mode == 'engine' else 'modelled'} memory: max "
        f"{human_bytes(s['max_bytes'])} at {s['max_at'] / 1000:g} s = "
        f"{s['max_over_budget']:.3f} × budget = {s['max_over_budget_plus_reserve']:.3f} × "
        f"(budget + reserve): {'never over' if s['within_budget_plus_reserve'] else 'OVER'} "
        f"budget + reserve; {s['samples_over_budget']} of {s['samples']} samples over the budget",
        f"  queries: {s['arrived']:,} arrived, {s['running_at_end']:,} running at the end, "
        f"{s['rejected']} rejected by admission control ({s['rejected_at_burst']} of them in the "
        f"burst), each taken out of the file again",
        f"  settings: {', '.join(f'{n:,} {k}' for k, n in s['changes'].items()) or 'no change'}; "
        f"{s['settings_checked']:,} checked against their ranges, {s['settings_outside']} outside",
    ]
    if mode == "engine":
        tk, dp = s["tick_seconds"], s["deploy_seconds"]
        lines.append(
            f"  manager rounds: {tk['n']}, mean {tk['mean']:.2f} s, max {tk['max']:.2f} s; "
            f"deploys: {dp['n']}, mean {dp['mean']:.2f} s; run {s['wall_seconds'] / 60:.1f} min"
        )
    else:
        dc, big = s["decide_seconds"], s["largest_decide"]
        lines.append(
            f"  decide: first round ({r['rounds'][0]['queries']:,} queries, no estimate cached) "
            f"{s['first_decide']:.1f} s; at the most queries ({big['queries']:,}) "
            f"{big.get('decide', 0):.1f} s; {dc['n']} rounds, mean {dc['mean']:.2f} s; "
            f"building the queries {r['build_seconds']:.0f} s; run {s['wall_seconds'] / 60:.1f} min"
        )
    for x in r["rejections"][:REJECTIONS_SHOWN]:
        lines.append(f"  rejected {x['query']} at {x['at'] / 1000:g} s: {x['reason']}")
    if len(r["rejections"]) > REJECTIONS_SHOWN:
        lines.append(f"  … and {len(r['rejections']) - REJECTIONS_SHOWN} more (the JSON has all)")
    return lines


REJECTIONS_SHOWN = 5


def chart(r: dict[str, Any], path: Path) -> None:
    """Memory over time against the budget (and budget ± reserve), the arrivals marked; below,
    the queries running and rejected. Written as a PNG to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tl = Timeline(**r["timeline"])
    s = r["series"]
    t = np.asarray(s["t"]) / 1000
    mib = 2**20
    fig, (top, low) = plt.subplots(
        2, 1, figsize=(9, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    label = "measured (operators' state)" if r["mode"] == "engine" else "model, with delays"
    top.plot(t, np.asarray(s["measured"]) / mib, lw=1.2, label=label)
    top.plot(
        t,
        np.asarray(s["estimated"]) / mib,
        lw=0.8,
        alpha=0.7,
        label="estimate at the settings in force",
    )
    b, res = r["budget"] / mib, r["reserve"] / mib
    top.axhline(b + res, color="tab:red", ls=":", lw=1, label="budget + reserve")
    top.axhline(b, color="tab:red", lw=1, label="budget")
    top.axhline(b - res, color="tab:red", ls="--", lw=0.8, label="budget − reserve (target)")
    for ax in (top, low):
        ax.axvspan(
            tl.ms(tl.trickle_from) / 1000,
            tl.ms(tl.trickle_to) / 1000,
            color="grey",
            alpha=0.12,
            label="trickle" if ax is top else None,
        )
        ax.axvline(
            tl.ms(tl.burst_at) / 1000,
            color="k",
            ls="-.",
            lw=0.8,
            label="burst" if ax is top else None,
        )
    top.set_ylabel("MiB")
    top.set_ylim(0, max(b + 2 * res, float(np.max(s["measured"], initial=0)) / mib * 1.05))
    top.legend(fontsize=7, loc="lower right")
    mode = "engine" if r["mode"] == "engine" else "model only"
    top.set_title(
        f"{mode}: {sum(n for _, n in r['arrivals']):,} queries, budget "
        f"{human_bytes(r['budget'])} ({r['share']:.0%} of full precision), times × {tl.scale:g}",
        fontsize=9,
    )
    low.plot(t, s["running"], label="queries running")
    low.plot(t, s["rejected"], label="rejected so far")
    low.set_ylabel("queries")
    low.legend(fontsize=7, loc="upper left")
    low.set_xlabel(f"application time (s; the paper's × {tl.scale:g})")
    low.set_xlim(0, tl.ms(tl.end) / 1000)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
