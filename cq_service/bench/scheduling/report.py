"""`cq bench scheduling`'s output: runs the chosen policies over a scenario and renders them as
JSON or as plain-text tables (memory per instant for the small tables; peak and average memory,
latency percentiles and context switches for the bursty ones)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from cq_service.bench.scheduling.policies import POLICIES
from cq_service.bench.scheduling.scenarios import Scenario
from cq_service.bench.scheduling.simulator import Result, run
from cq_service.bench.scheduling.workload import Workload

__all__ = [
    "DEFAULT_POLICIES",
    "as_json",
    "plot_shares",
    "results",
    "share_tradeoff",
    "text",
    "tradeoff",
]

DEFAULT_POLICIES = ("fifo", "round_robin", "greedy", "chain")
KNOWN = (*POLICIES, "opt")


def results(
    scenario: Scenario, names: Sequence[str], *, bound: int | None = None, quantum: int = 1
) -> dict[str, Result]:
    """Each named policy's run (``opt`` only on small scenarios). Raises ValueError."""
    for name in names:
        if name not in KNOWN:
            raise ValueError(f"unknown policy {name!r} (known: {', '.join(KNOWN)})")
        if name == "opt" and not scenario.small:
            raise ValueError("the brute-force optimum is only for the small scenarios")
    return {n: run(scenario.workload, n, bound=bound, quantum=quantum) for n in names}


def tradeoff(workload: Workload, bounds: Sequence[int]) -> list[tuple[int, Result]]:
    """chain_bounded at each latency bound: peak memory against latency."""
    return [(b, run(workload, "chain_bounded", bound=b)) for b in bounds]


def share_tradeoff(workload: Workload, shares: Sequence[Fraction]) -> list[tuple[Fraction, Result]]:
    """chain_share at each share of FIFO units, and at 0 (Chain) and 1 (FIFO), in order."""
    levels = sorted({Fraction(0), Fraction(1), *(Fraction(f) for f in shares)})
    return [(f, run(workload, "chain_share", share=f)) for f in levels]


def plot_shares(path: Path, title: str, trade: list[tuple[Fraction, Result]]) -> None:
    """Peak memory against p99 latency, one point per share, joined in order of the share."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r.latency(0.99) for _, r in trade]
    ys = [float(r.peak) for _, r in trade]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    ax.plot(xs, ys, "o-", label="chain_share (share of FIFO units)")
    for (f, _), x, y in zip(trade, xs, ys, strict=True):
        ax.annotate(f"{float(f):g}", (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.plot(xs[0], ys[0], "s", color="tab:green", markersize=9, label="chain (share 0)")
    ax.plot(xs[-1], ys[-1], "D", color="tab:red", markersize=8, label="fifo (share 1)")
    ax.set_xlabel("p99 latency (units)")
    ax.set_ylabel("peak memory (tuple sizes)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _summary(r: Result, memory: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"memory": [float(m) for m in r.memory]} if memory else {}
    out |= {
        "peak": float(r.peak),
        "average": float(r.average),
        "latency_p50": r.latency(0.5),
        "latency_p99": r.latency(0.99),
        "switches": r.switches,
    }
    return out


def as_json(
    name: str,
    runs: dict[str, Result],
    trade: list[tuple[int, Result]] | None = None,
    shares: list[tuple[Fraction, Result]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "scenario": name,
        "policies": {p: _summary(r) for p, r in runs.items()},
    }
    if trade is not None:
        out["tradeoff"] = [{"bound": b, **_summary(r, memory=False)} for b, r in trade]
    if shares is not None:
        out["share_tradeoff"] = [
            {"share": float(f), **_summary(r, memory=False)} for f, r in shares
        ]
    return out


def _num(x: float | int | None) -> str:
    if x is None:
        return "—"
    if isinstance(x, int):
        return str(x)
    s = f"{x:.3f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(cells))

    return [line(header), *(line(r) for r in rows)]


def text(
    scenario: Scenario,
    runs: dict[str, Result],
    trade: list[tuple[int, Result]] | None = None,
    shares: list[tuple[Fraction, Result]] | None = None,
) -> str:
    w = scenario.workload
    lines = [
        f"{scenario.name}: {scenario.description}",
        f"{w.tuples} tuples over {len(w.paths)} path(s), {w.work()} units of work, "
        f"offered load {w.load():.2f}",
        "",
    ]
    if scenario.small:
        instants = max(len(r.memory) for r in runs.values())
        header = ["t", *(str(t) for t in range(instants))]
        rows = [[p, *(_num(float(m)) for m in r.memory)] for p, r in runs.items()]
        lines += [*_grid(header, rows), ""]
    header = ["policy", "peak", "average", "p50 latency", "p99 latency", "switches"]
    rows = [
        [p, *(_num(v) for v in list(_summary(r, memory=False).values()))] for p, r in runs.items()
    ]
    lines += _grid(header, rows)
    if trade:
        lines += ["", "chain_bounded: peak memory vs latency"]
        rows = [
            [str(b), *(_num(v) for v in list(_summary(r, memory=False).values()))] for b, r in trade
        ]
        lines += _grid(["bound", *header[1:]], rows)
    if shares:
        lines += ["", "chain_share: peak memory vs latency (share 0 is chain, 1 is fifo)"]
        rows = [
            [f"{float(f):g}", *(_num(v) for v in list(_summary(r, memory=False).values()))]
            for f, r in shares
        ]
        lines += _grid(["share", *header[1:]], rows)
    return "\n".join(lines)
