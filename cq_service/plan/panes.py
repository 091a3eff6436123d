"""Fusing an aggregate with the sliding window below it into one paned operator.

`Aggregate` over `[Range T Slide L]` stores every element of the window and applies each as a
+ and a − delta. When the aggregate is the window's only reader, the two are replaced by one
node (`PanedAggregateOp`) that the engine runs as `PanedAggregate`
(engine/operators/paned_aggregate.py): per slice of the stream a partial aggregate per group,
combined at each slide. Its output is the same. The fusion is left out where that operator
could not give the same results or where something needs the window itself:

- windows without a slide (each instant would be its own slice) and granularity 1;
- aggregates without a MIN or MAX, which the plain aggregate applies faster in columns;
- windows a query's QoS may adjust at run time (`owner`), and windows read by anything but
  such aggregates (a window several aggregates read is fused into each);
- aggregates with a clock input, DISTINCT, float sums/averages, MIN/MAX of other than ints and
  timestamps, or float group keys (engine/operators/paned_aggregate.py `supports`).

Only the `cq run` path fuses (runner.py, and `cq explain` to show it): a live deployment keeps
the plain operators, whose windows the service sheds and adjusts and whose state it snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cq_service.cql import logical as L
from cq_service.plan.physical import PhysicalNode, PhysicalPlan
from cq_service.types import DataType

__all__ = ["PanedAggregateOp", "fusable", "fuse_panes"]


@dataclass(frozen=True)
class PanedAggregateOp:
    """`aggregate` over `window` (its input), run as one operator reading the window's input."""

    window: L.WindowOp
    aggregate: L.Aggregate

    @property
    def schema(self) -> tuple[L.Field, ...]:
        return self.aggregate.schema

    is_stream = False


def fusable(agg: L.Aggregate, window: L.WindowOp) -> bool:
    """Whether `agg` over `window` may run as one paned operator."""
    w = window.window
    if w.kind != "range" or window.owner is not None or agg.clock is not None:
        return False
    if not ((w.slide is not None and w.slide > 1) or w.granularity > 1):
        return False
    if any(k.type == DataType.FLOAT for k in agg.keys):
        return False
    if not any(a.fn in ("min", "max") for a in agg.aggs):
        # COUNT, SUM and AVG alone: the plain aggregate's columnar group table applies the
        # window's deltas about twice as fast (100 k groups, T/L 10); panes pay for MIN/MAX
        return False
    for a in agg.aggs:
        if a.distinct:
            return False
        if a.fn == "count":
            continue
        if a.arg is None:
            return False
        if a.fn in ("sum", "avg") and a.arg.type != DataType.INT:
            return False
        if a.fn in ("min", "max") and a.arg.type not in (DataType.INT, DataType.TIMESTAMP):
            return False
    return True


def fuse_panes(plan: PhysicalPlan) -> PhysicalPlan:
    """`plan` with every fusable aggregate-over-window pair as one node (nodes renumbered)."""
    readers: dict[int, list[PhysicalNode | None]] = {}
    for n in plan.nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n)
    for s in plan.sinks:
        readers.setdefault(s.input, []).append(None)

    def fuses(reader: PhysicalNode | None, window: PhysicalNode) -> bool:
        return (reader is not None and isinstance(reader.op, L.Aggregate)
                and reader.inputs == [window.id] and fusable(reader.op, window.op))  # type: ignore[arg-type]

    fused: dict[int, int] = {}  # aggregate node -> its window node
    for w in plan.nodes:
        # A window shared by several aggregates is fused into each (each keeps its partials);
        # one that anything else reads stays.
        if isinstance(w.op, L.WindowOp) and all(fuses(r, w) for r in readers.get(w.id, [None])):
            fused.update({r.id: w.id for r in readers[w.id]})  # type: ignore[union-attr]
    if not fused:
        return plan
    dropped = set(fused.values())
    new_id: dict[int, int] = {}
    nodes: list[PhysicalNode] = []
    for n in plan.nodes:
        if n.id in dropped:
            continue
        new_id[n.id] = len(nodes)
        if n.id in fused:
            window = plan.nodes[fused[n.id]]
            op = PanedAggregateOp(window.op, n.op)  # type: ignore[arg-type]
            inputs = [new_id[i] for i in window.inputs]
        else:
            op, inputs = n.op, [new_id[i] for i in n.inputs]
        nodes.append(PhysicalNode(new_id[n.id], op, inputs, list(n.queries)))  # type: ignore[arg-type]
    sinks = [replace(s, input=new_id[s.input]) for s in plan.sinks]
    return PhysicalPlan(nodes, sinks, dict(plan.source_columns))
