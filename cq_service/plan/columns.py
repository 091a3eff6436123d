"""Column pruning: which schema columns of each stream source some consumer actually uses.

Walks the physical plan from its readers down (sinks first, the plan being a DAG whose nodes
are listed inputs first), carrying per node the set of its output positions that any consumer
needs; a shared node gets the union of its consumers' needs. Operators that compare or emit
whole tuples need every input column: sinks, views (a view's emitted elements, and so the
instants its readers see, depend on whole tuples), Distinct, set operations and
Istream/Dstream/Rstream. Filters, windows, joins, mark joins and aggregates add the columns
their expressions read; a projection needs what its used expressions read (an expression never
fails on data: its errors are NULLs). Anything else needs everything.

A source read with fewer columns fills the others with NULLs of their type, so positions and
schemas stay as they are; results do not change because no operator reads those values.

    >>> # SELECT Rstream(auction, price) FROM Bid [Now]  ->  {"Bid": ("auction", "price")}
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from cq_service.cql import logical as L
from cq_service.cql.bind_expr import column_refs
from cq_service.plan.physical import PhysicalPlan

__all__ = ["needed_positions", "prune_source_columns", "source_columns"]


def _refs(*exprs: L.BExpr | None) -> set[int]:
    out: set[int] = set()
    for e in exprs:
        if e is not None:
            out |= column_refs(e)
    return out


def _every(op: L.LogicalOp) -> set[int]:
    return set(range(len(op.schema)))


def _input_needs(op: L.LogicalOp, need: set[int]) -> list[set[int]]:
    """The positions of each input of `op` (in `children` order) that `op` needs when its own
    output positions `need` are used."""
    kids = L.children(op)
    if isinstance(op, L.WindowOp):
        w = op.window
        return [need | set(w.partition_by) | _refs(w.where)]
    if isinstance(op, L.Sample):  # the decision depends on positions only
        return [set(need)]
    if isinstance(op, L.Filter):
        return [need | _refs(op.predicate)]
    if isinstance(op, L.Project):  # expressions never fail (errors are NULL): skip unused ones
        return [_refs(*(op.exprs[i] for i in sorted(need)))]
    if isinstance(op, L.Join):
        nl = len(op.left.schema)
        both = need | {nl + i for i in _refs(*op.right_keys)} | _refs(op.residual)
        left = {i for i in both if i < nl} | _refs(*op.left_keys)
        right = {i - nl for i in both if i >= nl}
        return [left, right]
    if isinstance(op, L.MarkJoin):
        nl = len(op.left.schema)
        left = {i for i in need if i < nl}
        left |= _refs(op.probe, *op.left_keys, op.default)
        left |= {i for i in _refs(op.correlation) if i < nl}
        return [{i for i in left if i < nl}, _every(op.right)]  # the subquery side: all of it
    if isinstance(op, L.Aggregate):
        needs = [_refs(*op.keys, *(a.arg for a in op.aggs))]
        if op.clock is not None:
            needs.append(set())  # ticks only
        return needs
    if isinstance(op, L.Clock):
        return [set() for _ in kids]
    # Source has no inputs; View, Distinct, SetOperation, RelToStream and anything unknown
    # need every column of every input.
    return [_every(k) for k in kids]


def needed_positions(plan: PhysicalPlan) -> dict[int, frozenset[int]]:
    """For every node id, the output positions some consumer of the node uses."""
    need: dict[int, set[int]] = {n.id: set() for n in plan.nodes}
    for s in plan.sinks:
        need[s.input] |= _every(plan.nodes[s.input].op)
    for node in reversed(plan.nodes):  # readers before their inputs
        for i, wanted in zip(node.inputs, _input_needs(node.op, need[node.id]), strict=True):
            need[i] |= wanted
    return {k: frozenset(v) for k, v in need.items()}


def source_columns(
    plan: PhysicalPlan,
    keep_all: Collection[str] = (),
    keep: Mapping[str, Collection[str]] | None = None,
) -> dict[str, tuple[str, ...]]:
    """For each stream source that may be pruned, the names of its schema columns the plan
    uses, in schema order. Relations (a deletion must match a whole stored tuple) and the
    sources named in `keep_all` (e.g. those whose late elements go to the dead letter with
    every column) are left out: they read every column. `keep[source]` names columns the
    source itself needs whatever the queries use (e.g. the field its heartbeats come from)."""
    need = needed_positions(plan)
    keep = keep or {}
    out: dict[str, tuple[str, ...]] = {}
    for node in plan.nodes:
        op = node.op
        if not isinstance(op, L.Source) or op.is_relation or op.name in keep_all:
            continue
        own = set(keep.get(op.name, ()))
        out[op.name] = tuple(
            f.name for i, f in enumerate(op.schema) if i in need[node.id] or f.name in own
        )
    return out


def prune_source_columns(
    plan: PhysicalPlan,
    keep_all: Collection[str] = (),
    keep: Mapping[str, Collection[str]] | None = None,
) -> PhysicalPlan:
    """`plan` with `source_columns` recorded on it (read by the runner and by explain)."""
    return replace(plan, source_columns=source_columns(plan, keep_all, keep))
