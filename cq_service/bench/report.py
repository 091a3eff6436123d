"""The NEXMark benchmark's tables (Markdown) and charts (PNG)."""

from __future__ import annotations

import statistics
from pathlib import Path

from cq_service.bench.nexmark_model import Cell, Row

__all__ = ["charts", "table", "targets"]


def _rate(v: float | None) -> str:
    if v is None:
        return "—"
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    return f"{v / 1e3:.0f} k" if v >= 1e3 else f"{v:.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.1f}×" if a and b else "—"


def _mib(v: int | None) -> str:
    return f"{v / 2**20:.0f}" if v else "—"


def _state(cq: Cell | None) -> str:
    """Our engine's peak state on half the input and on all of it."""
    if cq is None or cq.state_bytes is None:
        return "—"
    half = f"{cq.half_state_bytes / 2**20:.1f}" if cq.half_state_bytes is not None else "—"
    return f"{half} → {cq.state_bytes / 2**20:.1f}"


def _timed(c: Cell | None, seconds: list[float], rate: float | None) -> str:
    """'median s (events/s)', or why there is none."""
    if c is None:
        return "—"
    if not c.supported:
        return "cannot express"
    m = statistics.median(seconds) if seconds else None
    return f"{m:.2f} s ({_rate(rate)})" if m is not None else "—"


def table(rows: list[Row], meta: dict) -> str:
    """Two tables: the times and events/s of every engine, both ways, then the rest."""
    engines = [e for e in ("cq", "spark", "flink") if any(e in r.cells for r in rows)]
    peers = [e for e in engines if e != "cq"]
    times = (
        ["query", "events read", *(f"{e} in-process" for e in engines),
         *(f"{e} whole process" for e in engines),
         *(f"cq ÷ {e} (in-process / whole)" for e in peers)]
    )
    others = (
        ["query", "I/O floor events/s", "floor ÷ cq", "cq p50 / p99 ms at half rate",
         f"peak RSS MiB ({' / '.join(engines)})", "cq state MiB, ½ input → whole", "peers agree"]
    )
    lines = [
        f"NEXMark, {meta['events']:,} events ({meta['seed_note']}), median of {meta['repeat']}; "
        f"{meta['machine']}; {meta['date']}"
        + (f" ({meta['latency_note']})." if meta.get("latency_note") else "."),
        "",
        "Median seconds (events/s) per engine, timed two ways: in-process, from defining the "
        "query (planning, compiling or generating code, opening the sources) to its last output "
        "written, the interpreter, JVM and session or cluster already started and no warm-up "
        "run; and whole process, a fresh process per run from spawn to exit. Events/s counts "
        "the events of the streams the query reads (events read), not all generated events.",
        "",
        "| " + " | ".join(times) + " |",
        "|" + "---|" * len(times),
    ]
    rest = ["| " + " | ".join(others) + " |", "|" + "---|" * len(others)]
    notes = []
    for r in rows:
        cells = [r.cells.get(e) for e in engines]
        for e, c in zip(engines, cells, strict=True):
            if c is not None and c.note and (e != "cq" or not c.supported):
                notes.append(f"- {r.query} on {e}: {c.note}")
        inproc = [_timed(c, c.seconds, c.events_per_s) if c else "—" for c in cells]
        whole = [
            _timed(c, c.process_seconds, c.process_events_per_s) if c else "—" for c in cells
        ]
        cq = r.cells.get("cq")
        ratios = []
        for e in peers:
            peer = r.cells.get(e)
            ratios.append(
                f"{_ratio(cq and cq.events_per_s, peer and peer.events_per_s)} / "
                f"{_ratio(cq and cq.process_events_per_s, peer and peer.process_events_per_s)}"
            )
        read = f"{r.events_read:,}" if r.events_read is not None else "—"
        lines.append("| " + " | ".join([r.query, read, *inproc, *whole, *ratios]) + " |")
        cq_rate = cq.events_per_s if cq else None
        lat = cq.latency_ms if cq else None
        latency = f"{lat['p50']:.1f} / {lat['p99']:.1f}" if lat else "—"
        rss = " / ".join(_mib(r.cells[e].peak_rss) if e in r.cells else "—" for e in engines)
        verdicts = [
            f"{e}: {'yes' if r.cells[e].agrees else 'NO'}"
            for e in engines
            if e in r.cells and r.cells[e].agrees is not None
        ]
        rest.append(
            f"| {r.query} | {_rate(r.floor_events_per_s)} | "
            f"{_ratio(r.floor_events_per_s, cq_rate)} | {latency} | {rss} | {_state(cq)} | "
            f"{', '.join(verdicts) or '—'} |"
        )
    lines += ["", "I/O floor, latency, memory and agreement (events/s in-process):", "", *rest]
    lines += ["", *targets(rows)]
    if notes:
        lines += ["", "Notes from the peers:", *notes]
    return "\n".join(lines) + "\n"


STATELESS = ("q0", "q1", "q2")
P99_TARGET_MS = 100.0


def _check(name: str, got: float | None, goal: float, unit: str, higher: bool) -> str:
    """One target as a table row: met, or missed and by how much."""
    if got is None:
        return f"| {name} | {'≥' if higher else '<'} {goal:g}{unit} | — | not measured |"
    met = got >= goal if higher else got < goal
    if met:
        verdict = "met"
    elif higher:
        verdict = f"missed by {goal / got:.2f}×" if got > 0 else "missed"
    else:
        verdict = f"missed by {got / goal:.2f}×"
    return f"| {name} | {'≥' if higher else '<'} {goal:g}{unit} | {got:.2f}{unit} | {verdict} |"


def _speedup(row: Row, engine: str) -> float | None:
    cq, peer = row.cells.get("cq"), row.cells.get(engine)
    if cq and cq.events_per_s and peer and peer.events_per_s:
        return cq.events_per_s / peer.events_per_s
    return None


def targets(rows: list[Row]) -> list[str]:
    """The issue's targets, per query: met, or missed and by how much."""
    out = ["Targets (ratios of in-process events/s from this run):", "", "| query: target | goal | measured | |",
           "|---|---|---|---|"]
    for r in rows:
        cq = r.cells.get("cq")
        rate = cq.events_per_s if cq else None
        if r.query in STATELESS:
            out.append(_check(f"{r.query}: cq ÷ spark", _speedup(r, "spark"), 1, "×", True))
            floor = r.floor_events_per_s / rate if rate and r.floor_events_per_s else None
            out.append(_check(f"{r.query}: floor ÷ cq", floor, 2, "×", False))
        else:
            out.append(_check(f"{r.query}: cq ÷ spark", _speedup(r, "spark"), 5, "×", True))
            out.append(_check(f"{r.query}: cq ÷ flink", _speedup(r, "flink"), 1, "×", True))
        p99 = cq.latency_ms["p99"] if cq and cq.latency_ms else None
        out.append(_check(f"{r.query}: p99 at half rate", p99, P99_TARGET_MS, " ms", False))
    return out


def charts(rows: list[Row], folder: Path) -> None:
    """nexmark-throughput.png (events/s per query and engine, log scale: in-process solid,
    whole process hatched in front) and nexmark-memory.png (peak resident memory)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = [e for e in ("cq", "spark", "flink") if any(e in r.cells for r in rows)]
    queries = [r.query for r in rows]
    width = 0.8 / max(1, len(engines))
    xs = range(len(rows))

    def values(e: str, value) -> list[float]:
        return [
            (value(r.cells[e]) or 0) if e in r.cells and r.cells[e].supported else 0
            for r in rows
        ]

    for name, label, log in (
        ("nexmark-throughput.png", "events read per second", True),
        ("nexmark-memory.png", "peak resident MiB", False),
    ):
        fig, ax = plt.subplots(figsize=(9, 4))
        for k, e in enumerate(engines):
            at = [i + k * width for i in xs]
            if log:
                bars = ax.bar(at, values(e, lambda c: c.events_per_s), width,
                              label=f"{e} in-process")
                ax.bar(at, values(e, lambda c: c.process_events_per_s), width, fill=False,
                       hatch="///", edgecolor=bars.patches[0].get_facecolor() if bars.patches
                       else None, label=f"{e} whole process")
            else:
                ax.bar(at, values(e, lambda c: (c.peak_rss or 0) / 2**20), width, label=e)
        ax.set_xticks([i + width * (len(engines) - 1) / 2 for i in xs], queries)
        ax.set_ylabel(label)
        if log:
            ax.set_yscale("log")
        ax.legend(fontsize="small", ncol=2 if log else 1)
        ax.set_title(f"NEXMark: {label} (0 = cannot express)")
        fig.tight_layout()
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)
