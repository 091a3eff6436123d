"""`cq explain`: the physical plan as text — operators, windows, queues, synopses, sharing."""

from __future__ import annotations

from cq_service.cql import logical as L
from cq_service.plan.mjoins import MJoinOp
from cq_service.plan.panes import PanedAggregateOp
from cq_service.plan.physical import PhysicalNode, PhysicalPlan
from cq_service.plan.shared_joins import SharedJoinOp, SharedJoinRouteOp
from cq_service.spec.sys_stream import is_sys_stream

__all__ = ["describe", "explain", "synopsis"]


def _detail(op: L.LogicalOp, filter_order: str = "a-greedy") -> tuple[str, str]:
    """(operator description, synopsis it keeps); `filter_order` orders a selection's
    conjuncts."""
    if isinstance(op, L.Source) and is_sys_stream(op.name):
        return ("statistics source SysStream (the engine's own, docs/sys-stream.md)",
                "-")
    if isinstance(op, L.Source):
        return (f"{'relation' if op.is_relation else 'stream'} source {op.name}",
                "reorder buffer (max_delay)")
    if isinstance(op, L.View):
        return (f"view {op.name} ({'stream' if op.is_stream else 'relation'})",
                "-" if op.is_stream else "current instant")
    if isinstance(op, L.WindowOp):
        w = op.window
        where = " where …" if w.where is not None else ""
        if w.kind == "unbounded":
            return f"window [Unbounded{where}]", "-"
        if w.kind == "rows":
            part = f"Partition By {list(w.partition_by)} " if w.partition_by else ""
            return f"window [{part}Rows {w.n}{where}]", "last N tuples" + (" per partition" if part else "")
        slide = f" Slide {w.slide}" if w.slide else ""
        text = f"window [Range {w.size}{slide}{where}]"
        if w.granularity > 1:
            text += f" Γ({w.granularity})"
        if op.owner is not None:
            text += f" (adjustable by {op.owner}'s qos)"
        return text, "tuples until they expire"
    if isinstance(op, L.Sample):
        return f"sample {op.percent:g}%", "-"
    if isinstance(op, L.Filter):
        n = _conjuncts(op.predicate)
        return ("select" if n < 2 else f"select ({n} conjuncts, order: {filter_order})"), "-"
    if isinstance(op, L.Project):
        return f"project {', '.join(f.name for f in op.fields)}", "-"
    if isinstance(op, L.Join):
        how = f"hash join on {len(op.left_keys)} key(s)" if op.left_keys else "nested-loop join"
        return how + (" + residual" if op.residual is not None else ""), "both inputs, by key"
    if isinstance(op, L.MarkJoin):
        return f"mark join ({op.mode})", "both inputs and current marks"
    if isinstance(op, L.Aggregate):
        aggs = ", ".join(a.fn + ("(distinct)" if a.distinct else "") for a in op.aggs)
        by = f"group by {len(op.keys)} key(s)" if op.keys else "global"
        if op.clock is not None:
            by += " (clocked by the query's inputs)"
        return f"aggregate {by}: {aggs}", "one state per group"
    if isinstance(op, PanedAggregateOp):
        agg = _detail(op.aggregate)[0].removeprefix("aggregate ")
        window = _detail(op.window)[0].removeprefix("window ")
        return (f"paned aggregate {agg} over {window}",
                "per slice of the window (about 2 per slide) one partial per group")
    if isinstance(op, MJoinOp):
        pipes = "; ".join("→".join(str(k) for k in o) for o in op.orders)
        how = "with A-Caching; " if op.caching else ""
        if op.auto:
            how = f"join: auto chose {'mjoin-caching' if op.caching else 'mjoin'}; "
        return (f"mjoin of {len(op.inputs)} inputs ({how}{len(op.edges)} equi-join key(s), "
                f"{len(op.filters)} filter(s); probe orders {pipes})",
                "each input, by the keys it is probed on")
    if isinstance(op, SharedJoinOp):
        how = f"on {len(op.left_keys)} key(s)" if op.left_keys else "nested loops"
        routes = ", ".join(f"#{i} {a} ⋈ {b}" for i, (a, b) in enumerate(op.routes))
        return (f"shared window join {how} ({op.policy.upper()}), routes {routes}",
                "each input over its largest window, by key")
    if isinstance(op, SharedJoinRouteOp):
        a, b = op.windows
        return f"shared join route #{op.index}: {a} ⋈ {b}", "-"
    if isinstance(op, L.Clock):
        return f"clock over {len(op.inputs)} input(s)", "-"
    if isinstance(op, L.Distinct):
        return "distinct", "count per row"
    if isinstance(op, L.SetOperation):
        return f"{op.op}{' all' if op.all else ''}", "-" if op.op == "union" and op.all else "count per row, both sides"
    if isinstance(op, L.RelToStream):
        return op.op, "whole relation" if op.op == "rstream" else "current instant"
    return type(op).__name__, "-"


def describe(op: L.LogicalOp) -> str:
    """One line on what the operator does."""
    return _detail(op)[0]


def synopsis(op: L.LogicalOp) -> str:
    """The synopsis the operator keeps ('-': none)."""
    return _detail(op)[1]


def _conjuncts(e: L.BExpr) -> int:
    if isinstance(e, L.Call) and e.fn == "and":
        return sum(_conjuncts(a) for a in e.args)
    return 1


def explain(plan: PhysicalPlan, policy: str = "chain", filter_order: str = "a-greedy") -> str:
    """The plan, one line per operator; a selection of several conjuncts names how it orders
    them (`filter_order`; the order itself changes at run time: `cq run --stats`)."""
    lines = [f"physical plan ({len(plan.nodes)} operators, {len(plan.sinks)} sinks, scheduler {policy})"]
    consumers: dict[int, int] = {}
    for n in plan.nodes:
        for i in n.inputs:
            consumers[i] = consumers.get(i, 0) + 1
    for s in plan.sinks:
        consumers[s.input] = consumers.get(s.input, 0) + 1
    for n in plan.nodes:
        lines.append(_line(n, consumers.get(n.id, 0), filter_order))
        if isinstance(n.op, L.Source) and n.op.name in plan.source_columns:
            lines.append(_pruned(n.op, plan.source_columns[n.op.name]))
    lines.extend(f"  {note}" for note in plan.notes)
    for s in plan.sinks:
        kind = s.sink.type + (f" {s.sink.format} {s.sink.path}" if s.sink.path else "")
        what = "stream" if s.is_stream else "relation as +/- deltas"
        lines.append(f"  sink {s.query}: {what} -> {kind}  <- q{s.input}")
        lines.append(f"      columns: {', '.join(s.columns)}")
    return "\n".join(lines)


def _pruned(op: L.Source, used: tuple[str, ...]) -> str:
    unused = [f.name for f in op.schema if f.name not in used]
    if not unused:
        return "      columns used: all"
    return (f"      columns used: {', '.join(used) or 'none'}; unused: {', '.join(unused)}"
            " (not read, NULL, where the source allows it)")


def _line(n: PhysicalNode, readers: int, filter_order: str) -> str:
    desc, syn = _detail(n.op, filter_order)
    ins = ", ".join(f"q{i}" for i in n.inputs) or "-"
    shared = f"  shared by {', '.join(n.queries)}" if len(n.queries) > 1 else (
        f"  ({n.queries[0]})" if n.queries else "  (unread input)")
    kind = "stream" if n.op.is_stream else "relation"
    return (f"  #{n.id} {desc}  <- {ins}  -> q{n.id} ({kind}, {readers} reader(s))"
            f"  synopsis: {syn}{shared}")
