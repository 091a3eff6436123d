"""Which windows a query's QoS lets the resource manager adjust (brief-costmodel §4).

A query with `qos` owns the Range windows (of a given, positive size) in its own FROM clauses and
subqueries — not those of the views it reads, which belong to the views' queries:

- a window a `qos.window` range covers may change size at run time;
- with a `qos.granularity` ladder, every such window carries the granularity
  operator Γ, starting at the finest rung (Γ(1) changes nothing). Γ sits on the window's output
  and so under whatever reads it: α(Γ(ω(S))) when an aggregation does.

Marking a window with its owner keeps it out of other queries' plans (plan/planner.py shares
only equal subplans), so one query's adjustments never change another's results.
"""

from __future__ import annotations

from dataclasses import replace

from cq_service.cql import logical as L
from cq_service.spec.model import QosSpec

__all__ = ["adjustable_windows"]


def adjustable_windows(plan: L.LogicalOp, query: str, qos: QosSpec) -> L.LogicalOp:
    """`plan` with the windows `qos` covers owned by `query` (unchanged without qos)."""
    if not qos.adjustable:
        return plan
    finest = qos.granularity[0] if qos.granularity else 1

    def covered(op: L.WindowOp) -> bool:
        if op.window.kind != "range" or op.window.size is None:
            return False
        if not op.window.size:  # [Now]: nothing to adjust
            return False
        if qos.granularity:
            return True
        names = {n.lower() for n in op.names}
        return any(r.stream is None or r.stream.lower() in names for r in qos.windows)

    def visit(op: L.LogicalOp) -> L.LogicalOp:
        if isinstance(op, L.View | L.Source):
            return op
        kids = L.children(op)
        new = tuple(visit(c) for c in kids)
        if any(a is not b for a, b in zip(new, kids)):
            op = L.with_children(op, new)
        if isinstance(op, L.WindowOp) and covered(op):
            return replace(op, window=replace(op.window, granularity=finest), owner=query)
        return op

    return visit(plan)
