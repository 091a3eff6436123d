"""`cq run --stats`: per-operator element counts and peak memory of queues and synopses; and
`cq explain --live`'s table of every entity's statistics (the rows SysStream publishes) and
its list of StreaMon's re-optimizers (engine/streamon.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cq_service.engine.constraint_status import format_k
from cq_service.engine.scheduler.priority import PriorityPolicy
from cq_service.engine.streamon import WatchStatus
from cq_service.spec.sys_stream import SYS_STREAM_FIELDS

if TYPE_CHECKING:
    from cq_service.runner import RunReport

__all__ = ["human_bytes", "render_live", "render_stats", "render_streamon"]


def human_bytes(n: float) -> str:
    """`n` bytes in B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


LABEL_WIDTH = 44  # the narrowest first column of `cq run --stats`


def render_stats(report: RunReport) -> str:
    ex = report.executor
    total_in = sum(s["elements"] for s in report.sources.values())
    rate = total_in / report.seconds if report.seconds > 0 else 0.0
    labels = {op.name: f"{op.name} {op.describe()}" for op in ex.operators}
    names = [*labels.values(), *(q.name for q in ex.queues), *(s.name for s in ex.sinks)]
    w = max([LABEL_WIDTH, *map(len, names)])  # whole labels: a filter order can be long
    lines = [
        f"ran {report.seconds:.3f} s, {ex.steps} scheduling steps ({ex.policy.name}), "
        f"{total_in} source elements ({rate:,.0f}/s)",
        f"{'operator':<{w}} {'in':>10} {'out':>10} {'peak rows':>10} {'peak bytes':>11}",
    ]
    for op in ex.operators:
        u = ex.memory.synopses.get(op.name)
        pr, pb = (u.peak_rows, u.peak_bytes) if u else (0, 0)
        lines.append(
            f"{labels[op.name]:<{w}} {op.rows_in:>10} {op.rows_out:>10} {pr:>10} "
            f"{human_bytes(pb):>11}"
        )
    lines.append(f"{'queue':<{w}} {'total':>10} {'':>10} {'peak rows':>10} {'peak bytes':>11}")
    for q in ex.queues:
        lines.append(
            f"{q.name:<{w}} {q.total_rows:>10} {'':>10} {q.peak_rows:>10} "
            f"{human_bytes(q.peak_bytes):>11}"
        )
    mem = ex.memory
    lines.append(
        f"queued elements: peak {mem.queued.peak_rows} rows / {human_bytes(mem.queued.peak_bytes)}, "
        f"average {mem.average_queue_rows:,.1f} rows / {human_bytes(int(mem.average_queue_bytes))}"
    )
    lines.append(f"peak memory of queues and synopses: {human_bytes(mem.peak_total_bytes)}")
    lines.extend(_latencies(report, w))
    lines.extend(_priorities(report, labels, w))
    return "\n".join(lines)


def _latencies(report: RunReport, w: int) -> list[str]:
    """Per query: from an input's arrival to the result it completed being written."""
    lines = [f"{'query latency':<{w}} {'results':>10} {'p50 ms':>10} {'p99 ms':>10} {'max ms':>11}"]
    for sink in report.executor.sinks:
        h = sink.latency
        lines.append(
            f"{sink.name:<{w}} {h.count:>10} {h.quantile(0.5) * 1e3:>10.3f} "
            f"{h.quantile(0.99) * 1e3:>10.3f} {h.max * 1e3:>11.3f}"
        )
    return lines


def _priorities(report: RunReport, labels: dict[str, str], w: int) -> list[str]:
    """The scheduler's view of each operator, when it learns one (greedy, chain)."""
    policy = report.executor.policy
    if not isinstance(policy, PriorityPolicy):
        return []
    st = policy.statistics
    lines = [f"{'scheduler statistics':<{w}} {'σ (bytes)':>10} {'µs/KiB':>10} {'priority':>10}"]
    for op in report.executor.downstream:
        lines.append(
            f"{labels[op.name]:<{w}} {st.selectivity(op):>10.4f} "
            f"{st.cost(op) * 1024 * 1e6:>10.3f} {policy.priority_of(op):>10.3g}"
        )
    return lines


def _constraint(row: tuple, col: Callable[[tuple, str], object]) -> str:
    """A constraint's columns in words: kind, attribute, k in use (∞ while unknown), counts."""
    k = col(row, "k")
    return (
        f"{str(col(row, 'constraint')).upper()} {col(row, 'constraint_on')} "
        f"k={'∞' if k is None else format_k(float(k))}, "  # type: ignore[arg-type]
        f"{col(row, 'k_increases')} increases, {col(row, 'k_violations')} violations, "
        f"{col(row, 'k_missed')} missed, {col(row, 'k_dropped')} dropped"
    )


def render_live(rows: Sequence[tuple], title: str) -> str:
    """Entities' statistics (SysStream's columns, engine/statistics.py) as a table: what
    `cq explain --live` prints. Rates are over the interval the rows cover."""
    at = {name: i for i, (name, _, _) in enumerate(SYS_STREAM_FIELDS)}

    def col(row: tuple, name: str) -> object:
        return row[at[name]]

    lines = [
        title,
        f"  {'kind':<8} {'entity':<16} {'in':>10} {'out':>10} {'sel':>7} {'µs/row':>8} {'queued':>8} "
        f"{'memory':>10} {'lag':>8}  what (window, filter order) [constraint]",
    ]
    for row in rows:
        sel, us, lag = col(row, "selectivity"), col(row, "us_per_row"), col(row, "lag")
        what = str(col(row, "detail"))
        extras = [str(v) for v in (col(row, "window"), col(row, "filter_order")) if v]
        if extras and not any(e in what for e in extras):
            what += f" ({'; '.join(extras)})"
        if col(row, "constraint"):
            what += f" [{_constraint(row, col)}]"
        lines.append(
            f"  {col(row, 'kind'):<8} {col(row, 'entity'):<16} {col(row, 'rows_in'):>10} "
            f"{col(row, 'rows_out'):>10} {'-' if sel is None else f'{sel:.3f}':>7} "
            f"{'-' if us is None else f'{us:.2f}':>8} {col(row, 'queued_rows'):>8} "
            f"{human_bytes(col(row, 'memory')):>10} {'-' if lag is None else lag:>8}  {what}"
        )
    return "\n".join(lines)


def render_streamon(statuses: Sequence[WatchStatus]) -> str:
    """StreaMon's registered re-optimizers: owner, kind, re-optimizations run (and how many
    changed the plan), what its profiler watches. What `cq explain --live` prints."""
    if not statuses:
        return "StreaMon re-optimizers: none"
    lines = [
        "StreaMon re-optimizers (re-optimizations run / that changed the plan):",
        f"  {'entity':<16} {'kind':<28} {'runs':>6} {'changed':>8}  watches",
    ]
    for st in statuses:
        lines.append(
            f"  {st.owner:<16} {st.kind:<28} {st.triggers:>6} {st.changes:>8}  {st.watches}"
        )
    return "\n".join(lines)
