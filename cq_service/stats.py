"""`cq run --stats`: per-operator element counts and peak memory of queues and synopses."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cq_service.runner import RunReport

__all__ = ["render_stats"]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def render_stats(report: RunReport) -> str:
    ex = report.executor
    total_in = sum(s["elements"] for s in report.sources.values())
    rate = total_in / report.seconds if report.seconds > 0 else 0.0
    lines = [
        f"ran {report.seconds:.3f} s, {ex.steps} scheduling steps ({ex.policy.name}), "
        f"{total_in} source elements ({rate:,.0f}/s)",
        f"{'operator':<44} {'in':>10} {'out':>10} {'peak rows':>10} {'peak bytes':>11}",
    ]
    for op in ex.operators:
        u = ex.memory.synopses.get(op.name)
        pr, pb = (u.peak_rows, u.peak_bytes) if u else (0, 0)
        label = f"{op.name} {op.describe()}"[:44]
        lines.append(f"{label:<44} {op.rows_in:>10} {op.rows_out:>10} {pr:>10} {_size(pb):>11}")
    lines.append(f"{'queue':<44} {'total':>10} {'':>10} {'peak rows':>10} {'peak bytes':>11}")
    for q in ex.queues:
        lines.append(f"{q.name:<44} {q.total_rows:>10} {'':>10} {q.peak_rows:>10} {_size(q.peak_bytes):>11}")
    lines.append(f"peak memory of queues and synopses: {_size(ex.memory.peak_total_bytes)}")
    return "\n".join(lines)
