"""Logical plans of a pipeline's queries -> one shared physical plan."""

from __future__ import annotations

from cq_service.cql.binder import BoundQuery
from cq_service.cql.logical import LogicalOp, WindowOp, children
from cq_service.plan.physical import PhysicalNode, PhysicalPlan, SinkNode
from cq_service.plan.rewrite import simplify
from cq_service.spec.model import SinkSpec

__all__ = ["plan_queries"]


def plan_queries(queries: list[tuple[BoundQuery, SinkSpec | None]]) -> PhysicalPlan:
    """One physical plan for all queries; equal subplans become one node."""
    nodes: list[PhysicalNode] = []
    memo: dict[tuple[LogicalOp, tuple], int] = {}

    def visit(op: LogicalOp, query: str) -> int:
        key = (op, _owned_items(op))
        hit = memo.get(key)
        if hit is not None:
            node = nodes[hit]
            if query not in node.queries:
                node.queries.append(query)
                for i in node.inputs:
                    _mark(i, query)
            return hit
        inputs = [visit(c, query) for c in children(op)]
        node = PhysicalNode(len(nodes), op, inputs, [query])
        nodes.append(node)
        memo[key] = node.id
        return node.id

    def _mark(i: int, query: str) -> None:
        node = nodes[i]
        if query not in node.queries:
            node.queries.append(query)
            for j in node.inputs:
                _mark(j, query)

    sinks: list[SinkNode] = []
    for bq, sink in queries:
        root = visit(simplify(bq.plan), bq.name)
        if sink is not None:
            sinks.append(
                SinkNode(
                    bq.name,
                    root,
                    sink,
                    bq.is_stream,
                    bq.columns,
                    [f.type for f in bq.plan.schema],
                )
            )
    return PhysicalPlan(nodes, sinks)


def _owned_items(op: LogicalOp) -> tuple:
    """The FROM items of the adjustable windows under `op`, in order. Two such windows are
    equal as plans (names do not compare) but are adjusted and logged by their own item, so
    subplans over different items stay apart."""
    out: list = []
    stack = [op]
    while stack:
        o = stack.pop()
        if isinstance(o, WindowOp) and o.owner is not None:
            out.append(o.names)
        stack.extend(reversed(children(o)))
    return tuple(out)
