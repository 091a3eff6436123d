"""Shared window joins (paper 002): one join serves every query whose join differs only in its
windows.

Queries often join the same two streams on the same keys with different windows (a dashboard
per time range, an alert per SLA). Planned alone, each keeps two windows and a join synopsis of
its own and probes them for every arrival. Planned together they share one `SharedJoinOp`: one
buffer per stream covering the largest window, one probe per arrival, and a `SharedJoinRouteOp`
per distinct window pair that turns the shared results into exactly the relation that window's
join would produce (engine/operators/shared_join.py). Queries with equal windows share a route.

A join is shared when each input is a window (with selections over it) on a stream:

- `[Range T]` without a slide, granularity or inner WHERE, or `[Rows N]` without a partition or
  inner WHERE; the two sides may differ (`A [Range 5], B [Rows 10]`);
- windows a query's QoS may adjust (`owner`) stay with their query: adjusting a shared window
  would change the other queries' results;
- the selections over the windows and the join's residual predicate move above the route, as
  one filter per query: on a relation, σ(A) ⋈ B = σ'(A ⋈ B), whatever the window.

Joins group by (left stream, right stream, keys); a group with at least two distinct window
pairs becomes one shared join. This is a rewrite of the physical plan: on the `cq run` path
(and `cq explain`, after pane fusion, plan/panes.py) and on the worker, for each group of a
deployment's queries planned together (service/deployer.py); it never reaches across groups or
deployments. `resources.shared_join: off` plans each query alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from cq_service.cql import logical as L
from cq_service.cql.bind_expr import and_all, shift_columns
from cq_service.plan.physical import PhysicalNode, PhysicalPlan
from cq_service.spec.model import SHARED_JOINS

__all__ = [
    "SHARED_JOIN_POLICIES",
    "SharedJoinOp",
    "SharedJoinRouteOp",
    "SideWindow",
    "share_window_joins",
]

# `resources.shared_join` (docs/scheduling.md, "Shared window joins"): how a shared join orders
# its work — "mqt", "swf", "lwo" — or "off", each query planned alone. One list, the spec's.
SHARED_JOIN_POLICIES = SHARED_JOINS

# Routes are one bit each of a 64-bit mask (engine/operators/shared_join.py).
MAX_ROUTES = 63


@dataclass(frozen=True, order=True)
class SideWindow:
    """One input's window in a route: the last `size` time units (`range`, [τ − size, τ]) or
    the last `size` tuples (`rows`)."""

    kind: Literal["range", "rows"]
    size: int

    def __str__(self) -> str:
        return f"[{'Range' if self.kind == 'range' else 'Rows'} {self.size}]"


@dataclass(frozen=True)
class SharedJoinOp:
    """`left` ⋈ `right` on the keys, for each window pair of `routes`: its output carries every
    route's results, each element tagged with the routes it belongs to."""

    left: L.LogicalOp
    right: L.LogicalOp
    left_keys: tuple[L.BExpr, ...]
    right_keys: tuple[L.BExpr, ...]
    routes: tuple[tuple[SideWindow, SideWindow], ...]
    policy: str = "mqt"
    # Routes read only through filters by Istream: their retractions matter only where they
    # may cancel an equal insertion at the same instant (engine/operators/shared_join.py).
    istream_routes: frozenset[int] = frozenset()

    @property
    def schema(self) -> tuple[L.Field, ...]:
        return self.left.schema + self.right.schema

    is_stream = False


@dataclass(frozen=True)
class SharedJoinRouteOp:
    """The relation `left [routes[index][0]] ⋈ right [routes[index][1]]` of a shared join."""

    shared: SharedJoinOp
    index: int

    @property
    def schema(self) -> tuple[L.Field, ...]:
        return self.shared.schema

    @property
    def windows(self) -> tuple[SideWindow, SideWindow]:
        return self.shared.routes[self.index]

    is_stream = False


def side_window(op: L.WindowOp) -> SideWindow | None:
    """The window as a route's side, or None when a shared join cannot serve it."""
    w = op.window
    if op.owner is not None or w.where is not None:
        return None
    if w.kind == "range" and w.slide is None and w.granularity == 1 and w.size is not None:
        return SideWindow("range", w.size)
    if w.kind == "rows" and not w.partition_by and w.n is not None:
        return SideWindow("rows", w.n)
    return None


@dataclass
class _Candidate:
    join: PhysicalNode
    streams: tuple[int, int]  # the plan nodes of the two windows' input streams
    windows: tuple[SideWindow, SideWindow]
    predicate: L.BExpr | None  # the selections over the windows and the residual, on the pair


def _side(plan: PhysicalPlan, node_id: int) -> tuple[int, SideWindow, list[L.BExpr]] | None:
    """(stream node, window, selections) when `node_id` is selections over a shareable window
    over a stream."""
    preds: list[L.BExpr] = []
    node = plan.nodes[node_id]
    while isinstance(node.op, L.Filter):
        preds.append(node.op.predicate)
        node = plan.nodes[node.inputs[0]]
    if not isinstance(node.op, L.WindowOp) or not node.op.input.is_stream:
        return None
    win = side_window(node.op)
    if win is None:
        return None
    return node.inputs[0], win, preds[::-1]


def _candidate(plan: PhysicalPlan, node: PhysicalNode) -> _Candidate | None:
    op = node.op
    if not isinstance(op, L.Join):
        return None
    left, right = _side(plan, node.inputs[0]), _side(plan, node.inputs[1])
    if left is None or right is None:
        return None
    width = len(op.left.schema)
    preds = left[2] + [shift_columns(p, width) for p in right[2]]
    if op.residual is not None:
        preds.append(op.residual)
    predicate = and_all(preds) if preds else None
    return _Candidate(node, (left[0], right[0]), (left[1], right[1]), predicate)


def share_window_joins(plan: PhysicalPlan, policy: str = "mqt") -> PhysicalPlan:
    """`plan` with each group of joins that differ only in their windows served by one shared
    join (nodes renumbered); `plan` itself when nothing is shared or `policy` is "off"."""
    if policy == "off":
        return plan
    groups: dict[tuple, list[_Candidate]] = {}
    for node in plan.nodes:
        c = _candidate(plan, node)
        if c is not None:
            op = node.op
            key = (c.streams, op.left_keys, op.right_keys)  # type: ignore[union-attr]
            groups.setdefault(key, []).append(c)
    groups = {
        k: cs for k, cs in groups.items() if 2 <= len({c.windows for c in cs}) <= MAX_ROUTES
    }
    if not groups:
        return plan
    return _rewrite(plan, list(groups.values()), policy)


def _rewrite(plan: PhysicalPlan, groups: list[list[_Candidate]], policy: str) -> PhysicalPlan:
    # New nodes get ids after the plan's; `replaced` maps each shared join node to the node
    # that now stands for it. Then unread nodes go and the rest are renumbered in order.
    nodes = {n.id: PhysicalNode(n.id, n.op, list(n.inputs), list(n.queries)) for n in plan.nodes}
    replaced: dict[int, int] = {}
    next_id = len(plan.nodes)

    def add(op, inputs: list[int], queries: list[str]) -> int:
        nonlocal next_id
        nodes[next_id] = PhysicalNode(next_id, op, inputs, list(dict.fromkeys(queries)))
        next_id += 1
        return next_id - 1

    for cands in groups:
        first = cands[0]
        jop: L.Join = first.join.op  # type: ignore[assignment]
        routes = tuple(sorted({c.windows for c in cands}))
        istream = frozenset(
            i for i, w in enumerate(routes)
            if all(_read_by_istream_only(plan, c.join.id) for c in cands if c.windows == w)
        )
        shared = SharedJoinOp(
            plan.nodes[first.streams[0]].op,
            plan.nodes[first.streams[1]].op,
            jop.left_keys,
            jop.right_keys,
            routes,
            policy,
            istream,
        )
        every = [q for c in cands for q in c.join.queries]
        shared_id = add(shared, list(first.streams), every)
        route_ids: dict[int, int] = {}
        for i, w in enumerate(routes):
            users = [q for c in cands if c.windows == w for q in c.join.queries]
            route_ids[i] = add(SharedJoinRouteOp(shared, i), [shared_id], users)
        for c in cands:
            rid = route_ids[routes.index(c.windows)]
            if c.predicate is None:
                replaced[c.join.id] = rid
            else:
                op = L.Filter(nodes[rid].op, c.predicate)  # type: ignore[arg-type]
                replaced[c.join.id] = add(op, [rid], c.join.queries)

    def target(i: int) -> int:
        return replaced.get(i, i)

    for n in list(nodes.values()):
        if n.id not in replaced:
            n.inputs = [target(i) for i in n.inputs]
    sinks = [replace(s, input=target(s.input)) for s in plan.sinks]
    # Keep what a sink reaches (and every source: unread sources still count their input).
    live: set[int] = set()
    stack = [s.input for s in sinks] + [n.id for n in plan.nodes if isinstance(n.op, L.Source)]
    while stack:
        i = stack.pop()
        if i not in live:
            live.add(i)
            stack.extend(nodes[i].inputs)
    order = _topological([nodes[i] for i in sorted(live)])
    new_id = {n.id: k for k, n in enumerate(order)}
    out = [
        PhysicalNode(new_id[n.id], n.op, [new_id[i] for i in n.inputs], list(n.queries))
        for n in order
    ]
    sinks = [replace(s, input=new_id[s.input]) for s in sinks]
    return PhysicalPlan(out, sinks, dict(plan.source_columns))


def _read_by_istream_only(plan: PhysicalPlan, node_id: int) -> bool:
    """Whether every reader of the node is an Istream, directly or through filters (which keep
    or drop equal rows alike), and no sink reads it or a filter between."""
    readers = plan.consumers(node_id)
    if not readers or any(s.input == node_id for s in plan.sinks):
        return False
    for i in readers:
        op = plan.nodes[i].op
        if isinstance(op, L.Filter):
            if not _read_by_istream_only(plan, i):
                return False
        elif not (isinstance(op, L.RelToStream) and op.op == "istream"):
            return False
    return True


def _topological(nodes: list[PhysicalNode]) -> list[PhysicalNode]:
    """`nodes` with every node after its inputs, otherwise in id order."""
    by_id = {n.id: n for n in nodes}
    done: set[int] = set()
    out: list[PhysicalNode] = []

    def visit(n: PhysicalNode) -> None:
        if n.id in done:
            return
        done.add(n.id)
        for i in n.inputs:
            visit(by_id[i])
        out.append(n)

    for n in nodes:
        visit(n)
    return out
