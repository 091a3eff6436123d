"""Multi-way joins (issue 25, part 1): a tree of inner joins becomes one n-way MJoin.

Planned from the FROM list, a join of n relations is a tree of n − 1 binary joins, each keeping
its inputs' synopses, so every intermediate result of the tree is materialised and kept. An
`MJoinOp` joins the tree's n leaves at once (engine/operators/mjoin.py): it keeps one synopsis
per input and no intermediate result; an update on one input probes the others, one after the
other in that input's *pipeline* order, and yields the result's insertions or deletions.

The rewrite takes each maximal tree of `Join` nodes (a join whose readers are all joins is
folded into them), flattens it into its leaves in left-to-right order — so the output columns
are the tree's, in the tree's order, and nothing above changes — and splits the join
predicates into conjuncts over the concatenated leaves:

- an *edge*: an equality whose two sides each read columns of exactly one leaf, two different
  leaves (the binary joins' keys; a probe finds its matches through a hash index);
- a *filter*: every other conjunct (residuals, equalities of expressions over several leaves),
  applied as soon as every leaf it reads is bound.

A tree is rewritten when it has at least 3 leaves (2 leaves are a binary join already) and its
edges connect them all: a disconnected graph would need a Cartesian product, which the tree
keeps. Each input's pipeline is a static order (`static_order`): from the updated input, the
next leaf is always one joined by an edge to those bound so far (so every probe goes through a
hash index, and a cyclic graph is probed along a spanning tree whose other edges become part
of the probe's key), the one with most edges into the bound set first, then the lowest index.
Part 2 of the issue replaces these orders adaptively; an `MJoinOp` carries them as data.

`resources.join`: ``tree`` keeps the binary joins; ``mjoin`` rewrites every eligible tree;
``mjoin-caching`` does too, with subresult caches (A-Caching, engine/operators/mjoin_cache.py);
``auto`` (the default) asks a `Chooser` — a cost function the caller passes in (the compiler
passes adaptive/join_choice.py's; plan/ does not import adaptive/) — which form each eligible
tree takes, and keeps the tree where no chooser is given. Each choice made is noted in the
plan (`PhysicalPlan.notes`), so `cq explain` names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from cq_service.cql import logical as L
from cq_service.cql.bind_expr import column_refs, shift_columns
from cq_service.plan.physical import PhysicalNode, PhysicalPlan
from cq_service.spec.model import JOINS
from cq_service.types import DataType

__all__ = [
    "FORMS",
    "JOIN_SETTINGS",
    "Chooser",
    "Edge",
    "JoinCandidate",
    "JoinChoice",
    "MJoinOp",
    "multiway_joins",
    "static_order",
]

# `resources.join`: one list, the spec's.
JOIN_SETTINGS = JOINS

# The fewest leaves a rewritten tree has.
MIN_INPUTS = 3

# The forms `join: auto` chooses among, simplest first (ties go to the earlier).
FORMS = ("tree", "mjoin", "mjoin-caching")


@dataclass(frozen=True)
class Edge:
    """An equi-join conjunct ``left_expr(leaf left) = right_expr(leaf right)``; each expression
    reads its own leaf's columns (indexes local to that leaf)."""

    left: int
    left_expr: L.BExpr
    right: int
    right_expr: L.BExpr

    def side(self, leaf: int) -> L.BExpr:
        """The expression over `leaf` (one of the two)."""
        return self.left_expr if leaf == self.left else self.right_expr

    def other(self, leaf: int) -> int:
        return self.right if leaf == self.left else self.left


@dataclass(frozen=True)
class MJoinOp:
    """The inner join of `inputs` on `edges` and `filters` (over the inputs' columns
    concatenated in order); `orders[i]` is input i's pipeline: i, then the inputs it probes."""

    inputs: tuple[L.LogicalOp, ...]
    edges: tuple[Edge, ...]
    filters: tuple[L.BExpr, ...]
    orders: tuple[tuple[int, ...], ...]
    caching: bool = False  # subresult caches chosen by A-Caching (`join: mjoin-caching`)
    auto: bool = False  # chosen by `join: auto`'s cost model

    @property
    def schema(self) -> tuple[L.Field, ...]:
        return tuple(f for op in self.inputs for f in op.schema)

    @property
    def offsets(self) -> tuple[int, ...]:
        """Each input's first column in the output."""
        out, at = [], 0
        for op in self.inputs:
            out.append(at)
            at += len(op.schema)
        return tuple(out)

    is_stream = False


@dataclass(frozen=True)
class JoinCandidate:
    """An eligible tree: its top join `root`, the MJoin it would become, its leaves' and its
    joins' node ids (in `plan`), and for each of the MJoin's edges the join it came from."""

    root: int
    op: MJoinOp
    leaves: tuple[int, ...]
    joins: tuple[int, ...]
    edge_joins: tuple[int, ...]


@dataclass(frozen=True)
class JoinChoice:
    """What `join: auto` chose for one tree: `form` (one of `FORMS`) and each form's estimated
    (work in rows per time unit, state in rows); `assumed`: statistics taken from defaults."""

    form: str
    costs: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    assumed: tuple[str, ...] = ()

    def note(self, queries: list[str], n: int) -> str:
        """One line for `cq explain`."""
        est = "; ".join(f"{f} {w:.3g}" for f, (w, _) in self.costs.items())
        who = ", ".join(queries) or "an unread query"
        return f"join auto: {who}'s {n}-way join runs as {self.form}" + (
            f" (estimated work in rows per time unit: {est})" if est else ""
        )


# plan, candidate -> its form; the compiler passes adaptive/join_choice.py's.
Chooser = Callable[[PhysicalPlan, JoinCandidate], JoinChoice]


def static_order(n: int, edges: tuple[Edge, ...], start: int) -> tuple[int, ...]:
    """Input `start`'s pipeline: from it, repeatedly the unbound input with most edges into
    the bound ones (ties: the lowest index); the graph must be connected."""
    bound = [start]
    while len(bound) < n:
        links = {}
        for e in edges:
            for a, b in ((e.left, e.right), (e.right, e.left)):
                if a in bound and b not in bound:
                    links[b] = links.get(b, 0) + 1
        if not links:
            raise ValueError("the join graph is not connected")
        bound.append(min(links, key=lambda k: (-links[k], k)))
    return tuple(bound)


def multiway_joins(
    plan: PhysicalPlan, setting: str = "auto", choose: Chooser | None = None
) -> PhysicalPlan:
    """`plan` with each maximal tree of at least 3 joins' leaves whose equi-join graph is
    connected replaced by one `MJoinOp` (nodes renumbered); under ``auto`` each such tree takes
    the form `choose` picks (the tree where there is no `choose`), and the choices are noted in
    the plan. `plan` itself when nothing is rewritten or noted."""
    if setting not in JOIN_SETTINGS:
        raise ValueError(f"unknown join setting {setting!r}")
    if setting == "tree" or (setting == "auto" and choose is None):
        return plan
    nodes = {n.id: PhysicalNode(n.id, n.op, list(n.inputs), list(n.queries)) for n in plan.nodes}
    changed = False
    notes: list[str] = []
    for n in plan.nodes:
        if not isinstance(n.op, L.Join) or not _is_root(plan, n.id):
            continue
        cand = _candidate(plan, n.id)
        if cand is None:
            continue
        form = setting
        if setting == "auto":
            assert choose is not None
            choice = choose(plan, cand)
            if choice.form not in FORMS:
                raise ValueError(f"join auto chose an unknown form {choice.form!r}")
            form = choice.form
            notes.append(choice.note(n.queries, len(cand.leaves)))
            if form == "tree":
                continue
        op = replace(cand.op, caching=form == "mjoin-caching", auto=setting == "auto")
        nodes[n.id] = PhysicalNode(n.id, op, list(cand.leaves), list(n.queries))
        changed = True
    out = _renumbered(plan, nodes) if changed else plan
    if notes:
        out = replace(out, notes=[*out.notes, *notes])
    return out


def _is_root(plan: PhysicalPlan, node_id: int) -> bool:
    """A join some non-join (or a sink) reads: the top of a tree."""
    if any(s.input == node_id for s in plan.sinks):
        return True
    readers = plan.consumers(node_id)
    return not readers or any(not isinstance(plan.nodes[i].op, L.Join) for i in readers)


def _candidate(plan: PhysicalPlan, root: int) -> JoinCandidate | None:
    """The tree at `root` as an MJoin, or None when it is not eligible."""
    leaves: list[int] = []
    joins: list[int] = []
    conjuncts: list[tuple[L.BExpr, L.BExpr] | L.BExpr] = []  # (left, right) equalities or preds
    owners: list[int] = []  # the join each conjunct comes from

    def visit(node_id: int, base: int) -> int:
        node = plan.nodes[node_id]
        op = node.op
        if not isinstance(op, L.Join):
            leaves.append(node_id)
            return len(op.schema)
        wl = visit(node.inputs[0], base)
        wr = visit(node.inputs[1], base + wl)
        joins.append(node_id)
        for lk, rk in zip(op.left_keys, op.right_keys, strict=True):
            conjuncts.append((shift_columns(lk, base), shift_columns(rk, base + wl)))
            owners.append(node_id)
        if op.residual is not None:
            split = _split(shift_columns(op.residual, base))
            conjuncts.extend(split)
            owners.extend([node_id] * len(split))
        return wl + wr

    visit(root, 0)
    if len(leaves) < MIN_INPUTS:
        return None
    widths = [len(plan.nodes[i].op.schema) for i in leaves]
    offsets = [sum(widths[:k]) for k in range(len(widths))]

    def leaf_of(e: L.BExpr) -> int | None:
        """The one leaf `e` reads, or None (several, or none)."""
        owners = {_leaf(offsets, widths, c) for c in column_refs(e)}
        return owners.pop() if len(owners) == 1 else None

    edges: list[Edge] = []
    edge_joins: list[int] = []
    filters: list[L.BExpr] = []
    for c, owner in zip(conjuncts, owners, strict=True):
        if isinstance(c, tuple):
            lk, rk = c
            a, b = leaf_of(lk), leaf_of(rk)
            if a is not None and b is not None and a != b:
                edges.append(
                    Edge(a, shift_columns(lk, -offsets[a]), b, shift_columns(rk, -offsets[b]))
                )
                edge_joins.append(owner)
            else:
                filters.append(L.Call("eq", (lk, rk), DataType.BOOL))
        else:
            filters.append(c)
    n = len(leaves)
    try:
        orders = tuple(static_order(n, tuple(edges), i) for i in range(n))
    except ValueError:
        return None  # not connected: the tree keeps its Cartesian product
    inputs = tuple(plan.nodes[i].op for i in leaves)
    op = MJoinOp(inputs, tuple(edges), tuple(filters), orders)
    return JoinCandidate(root, op, tuple(leaves), tuple(joins), tuple(edge_joins))


def _leaf(offsets: list[int], widths: list[int], col: int) -> int:
    for k, (o, w) in enumerate(zip(offsets, widths, strict=True)):
        if o <= col < o + w:
            return k
    raise ValueError(f"column {col} is in no input")


def _split(e: L.BExpr) -> list[L.BExpr]:
    """The conjuncts of an AND tree."""
    if isinstance(e, L.Call) and e.fn == "and":
        return [x for a in e.args for x in _split(a)]
    return [e]


def _renumbered(plan: PhysicalPlan, nodes: dict[int, PhysicalNode]) -> PhysicalPlan:
    """The nodes a sink reaches (and every source), renumbered in order."""
    live: set[int] = set()
    stack = [s.input for s in plan.sinks]
    stack += [n.id for n in plan.nodes if isinstance(n.op, L.Source)]
    while stack:
        i = stack.pop()
        if i not in live:
            live.add(i)
            stack.extend(nodes[i].inputs)
    new_id = {old: k for k, old in enumerate(sorted(live))}  # inputs precede their readers
    out = [
        PhysicalNode(
            new_id[i], nodes[i].op, [new_id[j] for j in nodes[i].inputs], list(nodes[i].queries)
        )
        for i in sorted(live)
    ]
    sinks = [replace(s, input=new_id[s.input]) for s in plan.sinks]
    return PhysicalPlan(out, sinks, dict(plan.source_columns), list(plan.notes))
