"""The NEXMark benchmark's table (Markdown) and charts (PNG)."""

from __future__ import annotations

from pathlib import Path

from cq_service.bench.nexmark import Row

__all__ = ["charts", "table"]


def _rate(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v / 1e6:.2f} M" if v >= 1e6 else f"{v / 1e3:.0f} k"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.1f}×" if a and b else "—"


def _mib(v: int | None) -> str:
    return f"{v / 2**20:.0f}" if v else "—"


def table(rows: list[Row], meta: dict) -> str:
    engines = [e for e in ("cq", "spark", "flink") if any(e in r.cells for r in rows)]
    lines = [
        f"NEXMark, {meta['events']:,} events ({meta['seed_note']}), median of {meta['repeat']}; "
        f"{meta['machine']}; {meta['date']}.",
        "",
        "| query | " + " | ".join(f"{e} events/s" for e in engines)
        + " | cq ÷ spark | cq ÷ flink | I/O floor events/s | floor ÷ cq"
        + " | cq p50 / p99 ms at half rate | peak RSS MiB ("
        + " / ".join(engines) + ") | peers agree |",
        "|" + "---|" * (len(engines) + 7),
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
            + f" | {latency} | {rss} | {', '.join(verdicts) or '—'} |"
        )
    if notes:
        lines += ["", "Notes from the peers:", *notes]
    return "\n".join(lines) + "\n"


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
