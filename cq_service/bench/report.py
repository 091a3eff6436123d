"""The NEXMark benchmark's table (Markdown) and charts (PNG)."""

from __future__ import annotations

from pathlib import Path

from cq_service.bench.nexmark import Cell, Row

__all__ = ["charts", "table", "targets"]


def _rate(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v / 1e6:.2f} M" if v >= 1e6 else f"{v / 1e3:.0f} k"


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


def table(rows: list[Row], meta: dict) -> str:
    engines = [e for e in ("cq", "spark", "flink") if any(e in r.cells for r in rows)]
    header = (
        ["query", *(f"{e} events/s" for e in engines), "cq ÷ spark", "cq ÷ flink",
         "I/O floor events/s", "floor ÷ cq", "cq p50 / p99 ms at half rate",
         f"peak RSS MiB ({' / '.join(engines)})", "cq state MiB, ½ input → whole", "peers agree"]
    )
    lines = [
        f"NEXMark, {meta['events']:,} events ({meta['seed_note']}), median of {meta['repeat']}; "
        f"{meta['machine']}; {meta['date']}"
        + (f" ({meta['latency_note']})." if meta.get("latency_note") else "."),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    notes = []
    for r in rows:
        rates = []
        for e in engines:
            c = r.cells.get(e)
            if c is None:
                rates.append("—")
            elif not c.supported:
                rates.append("cannot express")
                notes.append(f"- {r.query} on {e}: {c.note}")
            else:
                rates.append(_rate(c.events_per_s))
                if c.note and e != "cq":
                    notes.append(f"- {r.query} on {e}: {c.note}")
        cq = r.cells.get("cq")
        cq_rate = cq.events_per_s if cq else None
        peer = {e: (r.cells[e].events_per_s if e in r.cells else None) for e in engines}
        lat = cq.latency_ms if cq else None
        latency = f"{lat['p50']:.1f} / {lat['p99']:.1f}" if lat else "—"
        rss = " / ".join(_mib(r.cells[e].peak_rss) if e in r.cells else "—" for e in engines)
        verdicts = [
            f"{e}: {'yes' if r.cells[e].agrees else 'NO'}"
            for e in engines
            if e in r.cells and r.cells[e].agrees is not None
        ]
        lines.append(
            f"| {r.query} | " + " | ".join(rates)
            + f" | {_ratio(cq_rate, peer.get('spark'))} | {_ratio(cq_rate, peer.get('flink'))}"
            + f" | {_rate(r.floor_events_per_s)} | {_ratio(r.floor_events_per_s, cq_rate)}"
            + f" | {latency} | {rss} | {_state(cq)} | {', '.join(verdicts) or '—'} |"
        )
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
    out = ["Targets (ratios from this run):", "", "| query: target | goal | measured | |",
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
    """nexmark-throughput.png (events/s per query and engine, log scale) and
    nexmark-memory.png (peak resident memory)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = [e for e in ("cq", "spark", "flink") if any(e in r.cells for r in rows)]
    queries = [r.query for r in rows]
    width = 0.8 / max(1, len(engines))
    for name, value, label, log in (
        ("nexmark-throughput.png", lambda c: c.events_per_s, "events per second", True),
        ("nexmark-memory.png", lambda c: (c.peak_rss or 0) / 2**20, "peak resident MiB", False),
    ):
        fig, ax = plt.subplots(figsize=(9, 4))
        for k, e in enumerate(engines):
            ys = [
                (value(r.cells[e]) or 0) if e in r.cells and r.cells[e].supported else 0
                for r in rows
            ]
            ax.bar([i + k * width for i in range(len(rows))], ys, width, label=e)
        ax.set_xticks([i + width * (len(engines) - 1) / 2 for i in range(len(rows))], queries)
        ax.set_ylabel(label)
        if log:
            ax.set_yscale("log")
        ax.legend()
        ax.set_title(f"NEXMark: {label} (0 = cannot express)")
        fig.tight_layout()
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)
