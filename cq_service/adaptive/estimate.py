"""Memory and CPU of a physical plan, operator by operator, from its sources' rates.

Characteristics (d, l, g) are computed bottom-up over the plan's edges (`cost_model`, formulas
1–8 of brief-costmodel.md). An edge carries a stream (elements valid one time unit, l = 1) or
a relation (each element is valid from its `+` to its `−`, so l is its lifetime and l/d the
relation's expected size). Memory follows from each operator's inputs, with the formula the
engine's implementation needs; each estimate says which formula it used:

- ``paper (n)``: brief-costmodel.md's formula as it stands;
- ``engine: …``: the project's own, where the engine keeps state differently from PIPES or the
  paper has no formula (distinct, set operations, Rows windows, the stream operators, the
  shared window join and its routes).

Two differences from PIPES matter most. The engine's Range window *stores* its tuples until
they leave (it emits their `−`), where the paper's time window only stamps them (M = 0); and the
engine's join and aggregate expire by instant, so the paper's wait term d/(2·d') in (9) is
absent. What is not measured (a filter's selectivity, a join's, a grouping's number of keys) is
taken from `Observed`, measured on the running plan (`adaptive.measure`), else a default the
estimate marks as assumed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from cq_service.adaptive import cost_model as cm
from cq_service.adaptive.cost_model import Edge
from cq_service.adaptive.cpu import BATCH_ROWS, EngineCosts
from cq_service.cql import logical as L
from cq_service.engine.operators.join_synopsis import JoinSide
from cq_service.plan.physical import PhysicalNode, PhysicalPlan
from cq_service.plan.shared_joins import SharedJoinOp, SharedJoinRouteOp, SideWindow
from cq_service.types import DataType

__all__ = [
    "DEFAULT_GROUPS",
    "DEFAULT_SELECTIVITY",
    "FOREVER",
    "MERGE_RATIO",
    "Observed",
    "OperatorEstimate",
    "batch_row_bytes",
    "estimate_plan",
    "groups_present",
    "range_window_edge",
    "settle_groups",
    "solve_groups",
    "values_kept",
]

FOREVER = 1e12  # the lifetime of a stored relation's rows, in time units ("for all time")
DEFAULT_SELECTIVITY = 0.5  # a filter or join predicate that was not measured
DEFAULT_GROUPS = 100.0  # keys of a grouping that was not measured
_ENUMERATION_LIMIT = 200_000  # residues of a window's period enumerated exactly


@dataclass(frozen=True)
class Observed:
    """What the estimates start from: each stream source's d (time units between elements)
    and element size, measured selectivities (node id -> share of results among candidates)
    and key counts (node id -> distinct keys: groups, distinct rows, partitions), stored
    relations' sizes, `elapsed` time (what an Unbounded window has accumulated) and each
    stream source's rows per read (`read_rows`; BATCH_ROWS when not given), which sets how
    many batches per time unit the plan runs."""

    source_d: Mapping[str, float]
    row_bytes: Mapping[str, float] = field(default_factory=dict)
    relation_rows: Mapping[str, float] = field(default_factory=dict)
    selectivity: Mapping[int, float] = field(default_factory=dict)
    groups: Mapping[int, float] = field(default_factory=dict)
    max_delay: Mapping[str, int] = field(default_factory=dict)
    elapsed: float = FOREVER
    read_rows: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class OperatorEstimate:
    """One plan node: its output's characteristics, the elements its synopses keep, their
    bytes, its CPU (seconds per second of application time) and how each was obtained."""

    node: int
    kind: str
    edge: Edge
    rows: float
    bytes: float
    cpu: float
    formula: str
    assumed: tuple[str, ...] = ()  # inputs not measured, taken from defaults
    row_bytes: float = 0.0  # bytes per element of the output, as a batch holds it
    stream: bool = True  # the output is a stream (else a relation of +/− deltas)
    column_bytes: float = 0.0  # of those, its columns' (what a join keeps of a row)
    reads: float = 0.0  # stream sources' reads per time unit whose batches reach it
    routes: tuple[Edge, ...] = ()  # a shared join's: each route's relation, as its join's

    @property
    def size(self) -> float:
        """Elements in the output relation (l/d), or per time unit of a stream."""
        return self.edge.size


def estimate_plan(
    plan: PhysicalPlan,
    observed: Observed,
    *,
    costs: EngineCosts | None = None,
    unit_seconds: float = 1e-3,
    windows: Mapping[int, tuple[int, int]] | None = None,
) -> dict[int, OperatorEstimate]:
    """Estimates for every node of `plan`, keyed by node id. `windows` overrides Range window
    settings (node id -> (size, granularity)): what the resource manager tries before it
    applies anything. `unit_seconds` is the pipeline's time unit in seconds."""
    costs = costs or EngineCosts.load()
    windows = windows or {}
    out: dict[int, OperatorEstimate] = {}
    for node in plan.nodes:
        ins = [out[i] for i in node.inputs]
        out[node.id] = _estimate(node, ins, observed, costs, unit_seconds, windows)
    return out


def settle_groups(
    plan: PhysicalPlan,
    observed: Observed,
    present: Mapping[int, float],
    *,
    unit_seconds: float = 1e-3,
) -> Observed:
    """`observed` with the key count n of each grouping (aggregate by keys, distinct) whose
    mean number of groups `present` was measured, solved over its estimated input size. One
    pass bottom-up: a grouping's input depends only on the nodes below it."""
    costs = EngineCosts()  # CPU plays no part here
    obs = observed
    out: dict[int, OperatorEstimate] = {}
    for node in plan.nodes:
        ins = [out[i] for i in node.inputs]
        if node.id in present and ins and ins[0].edge.rate > 0:
            n_in = ins[0].edge.size
            kept = values_kept(node.op, n_in) if isinstance(node.op, L.Aggregate) else 0.0
            groups = {**obs.groups, node.id: solve_groups(present[node.id] - kept, n_in)}
            obs = replace(obs, groups=groups)
        out[node.id] = _estimate(node, ins, obs, costs, unit_seconds, {})
    return obs


def _estimate(
    node: PhysicalNode,
    ins: list[OperatorEstimate],
    obs: Observed,
    costs: EngineCosts,
    unit_seconds: float,
    windows: Mapping[int, tuple[int, int]],
) -> OperatorEstimate:
    op = node.op
    assumed: list[str] = []
    if isinstance(op, L.Source):
        return _source(node, op, obs, costs, unit_seconds)
    edges = [e.edge for e in ins]
    in_bytes = [e.row_bytes for e in ins]
    out_bytes = max(in_bytes, default=0.0)
    column_bytes = max((e.column_bytes for e in ins), default=0.0)
    state_bytes = out_bytes  # bytes per element the operator keeps
    rows = 0.0
    routes: tuple[Edge, ...] = ()
    if isinstance(op, L.WindowOp):
        edge, rows, formula = _window(node, op, edges[0], obs, windows, assumed)
    elif isinstance(op, (L.Filter, L.Sample)):
        sel = (op.percent / 100.0) if isinstance(op, L.Sample) else _selectivity(node, obs, assumed)
        edge, formula = cm.select(edges[0], sel), "paper (2)"
    elif isinstance(op, (L.Project, L.View)):
        edge, formula = cm.project(edges[0]), "paper (1)"
        if isinstance(op, L.View) and not op.is_stream:
            rows, formula = edges[0].rate * 2, "paper (1); engine: a relation view holds one instant"
    elif isinstance(op, L.Join):
        a, b = edges
        sel = _selectivity(node, obs, assumed, default=_join_default(op))
        edge = cm.cross(a, b, sel)
        cols = [e.column_bytes for e in ins]
        column_bytes = sum(cols)  # an output row is a left row's columns, then a right row's
        out_bytes = column_bytes + batch_row_bytes(edge.d)
        sides = ((op.left, a, cols[0]), (op.right, b, cols[1]))
        rows = a.size + b.size  # each side holds its input's current rows
        state_bytes = _mean_bytes(  # bytes per current row, the expired ones kept included
            [(e.size, _join_stored(side, e) * (c + _join_row_bytes(op, side, e))) for side, e, c in sides]
        )
        formula = (
            "paper (4); engine: (9) without the wait term, each side its input's rows "
            "(columns, key, weight, index)"
        )
    elif isinstance(op, L.MarkJoin):
        edge = edges[0]
        rows = edges[0].size + edges[1].size
        state_bytes = _counted(op, extra=1)
        formula = "engine: both inputs kept, output follows the left input"
    elif isinstance(op, L.Aggregate):
        edge, rows, formula = _aggregate(node, op, edges[0], obs, assumed)
        out_bytes = state_bytes = _counted(op)
        column_bytes = 8.0 * len(op.schema)  # its output: one 8-byte value per column
    elif isinstance(op, L.Distinct):
        n = _groups(node, obs, assumed)
        edge = cm.group_by(edges[0], max(1, round(n))) if math.isfinite(n) else edges[0]
        rows = groups_present(n, edges[0].size)
        formula = "engine: distinct rows present, n(1 − e^(−N/n)); output (6)"
        state_bytes = _counted(op)
    elif isinstance(op, L.SetOperation):
        edge = cm.union(*edges)
        if op.op == "union" and op.all:
            formula = "paper (3)"
        else:
            n = _groups(node, obs, assumed)
            rows = sum(groups_present(n, e.size) for e in edges)
            formula = "paper (3) for the output; engine: distinct rows present per side"
            state_bytes = _counted(op)
    elif isinstance(op, SharedJoinOp):
        edge, rows, state_bytes, routes, formula = _shared_join(node, op, ins, obs, assumed)
        column_bytes = sum(e.column_bytes for e in ins)
        out_bytes = column_bytes + batch_row_bytes(edge.d) + 8.0  # and its route mask
    elif isinstance(op, SharedJoinRouteOp):
        shared = ins[0].routes
        edge = shared[op.index] if op.index < len(shared) else edges[0]
        out_bytes = column_bytes + batch_row_bytes(edge.d)
        formula = "engine: its route's pairs of the shared join's output; keeps nothing"
    elif isinstance(op, L.Clock):
        edge, formula = cm.union(*edges), "paper (3) (ticks only)"
    elif isinstance(op, L.RelToStream):
        edge, rows, formula = _to_stream(op, edges[0])
        if op.op == "rstream":
            state_bytes = _counted(op)
    else:  # a kind not modelled (a plan rewrite's): its input as it is, keeping nothing
        edge = edges[0] if edges else cm.EMPTY
        formula = f"none for {node.kind}: its input, no state"
        assumed.append(f"{node.kind} as its input")
    rows_in = sum(_flow(e.edge, e.stream) for e in ins)
    rows_out = _flow(edge, op.is_stream)
    reads = sum(e.reads for e in ins)
    # A shared join is not calibrated apart: a join's constants, its probes over the buffers.
    kind = "Join" if isinstance(op, SharedJoinOp) else node.kind
    pairs = _pairs(op, [e.edge for e in _buffers(op, ins)] if isinstance(op, SharedJoinOp) else edges)
    cpu = costs.cpu(kind, rows_in, rows_out, pairs, reads) / unit_seconds
    if isinstance(op, L.Project):  # about the same bytes per column
        share = len(op.schema) / max(1, len(op.input.schema))
        out_bytes *= share
        column_bytes *= share
    return OperatorEstimate(
        node.id,
        node.kind,
        edge,
        rows,
        rows * state_bytes,
        cpu,
        formula,
        tuple(assumed),
        out_bytes,
        op.is_stream,
        column_bytes,
        reads,
        routes,
    )


def _source(
    node: PhysicalNode, op: L.Source, obs: Observed, costs: EngineCosts, unit_seconds: float
) -> OperatorEstimate:
    assumed = []
    if op.is_relation:
        n = obs.relation_rows.get(op.name, 0.0)
        edge = Edge(FOREVER / n, FOREVER) if n > 0 else cm.EMPTY
        flow = 0.0
        formula = "engine: a stored relation, rows valid for all time"
    else:
        d = obs.source_d.get(op.name)
        if d is None:
            assumed.append(f"rate of {op.name}")
            edge = cm.EMPTY
        else:
            edge = cm.source(d)
        flow = edge.rate
        formula = "measured d, l = 1"
    delay = obs.max_delay.get(op.name, 0)
    rows = delay * edge.rate
    reads = flow / max(1.0, obs.read_rows.get(op.name, BATCH_ROWS)) if flow else 0.0
    cpu = costs.cpu(node.kind, flow, flow, 0.0, reads) / unit_seconds
    size = obs.row_bytes.get(op.name, 0.0)
    columns = max(0.0, size - batch_row_bytes(edge.d)) if size else 0.0
    return OperatorEstimate(
        node.id, node.kind, edge, rows, rows * size, cpu, formula, tuple(assumed), size,
        op.is_stream, columns, reads,
    )


def _counted(op: L.LogicalOp, extra: int = 2) -> float:
    """Bytes per row of a state kept as Python objects: operators that keep one count 8 bytes
    per value plus `extra` (key and count), as their `state_size` reports; windows and joins
    report their Arrow buffers instead."""
    return 8.0 * (len(op.schema) + extra)


def _mean_bytes(parts: list[tuple[float, float]]) -> float:
    """Bytes per element of a state made of `parts` (elements, bytes per element)."""
    n = sum(k for k, _ in parts)
    return sum(k * b for k, b in parts) / n if n > 0 else max((b for _, b in parts), default=0.0)


def _size(e: Edge) -> float:
    """Elements in a relation edge at any instant (l/d)."""
    return 0.0 if e.rate == 0 else e.l / e.d


# A join side whose input retracts other than its oldest rows first finds each retraction by
# the hash of the row it retracts: each row's hash and offset, sorted
# (engine/operators/join_synopsis.py).
ROW_HASH_BYTES = 16
# A join side's rows are runs; a new run merges into the one before it while that one holds at
# most this many times its rows (the engine's own constant).
MERGE_RATIO = JoinSide.MERGE_RATIO
FIFO_STORED = 1.0 + 0.5 / (MERGE_RATIO + 1)  # rows a FIFO side stores per current row


def batch_row_bytes(d: float) -> float:
    """Bytes a batch holds per element besides its columns (engine/batch.py): its timestamp and
    weight (8 bytes each) and 8 per tick, one per distinct instant. For Poisson arrivals d
    time units apart, the instants with an element per element are d·(1 − e^(−1/d)).
    The project's own accounting: the paper counts an element as one size s."""
    if not math.isfinite(d) or d <= 0:
        return 16.0
    return 16.0 + 8.0 * d * -math.expm1(-1.0 / d)


def _fifo(side: L.LogicalOp, e: Edge) -> bool:
    """A join input whose rows leave oldest first: a window without Partition By (its rows
    are dropped from the front of the side, engine/fifo.py)."""
    return isinstance(side, L.WindowOp) and not side.window.partition_by and e.l < FOREVER


def _join_row_bytes(op: L.Join, side: L.LogicalOp, e: Edge) -> float:
    """Bytes a join keeps per row of input `side` (edge `e`) besides the row's columns
    (engine/operators/join_synopsis.py, `Run.nbytes`): its key (8 bytes a key; a nested-loop
    join keys every row by one constant byte), its weight (8), the sorted index of a single
    integer key (value and offset, 16; the nested-loop join's constant key is one) and, for an
    input that retracts other than its oldest rows first, each row's hash and offset (16)."""
    keys = op.left_keys if side is op.left else op.right_keys
    key = 8.0 * len(keys) if keys else 1.0
    one_int = len(keys) == 1 and getattr(keys[0], "type", None) in (DataType.INT, DataType.TIMESTAMP)
    index = 16.0 if not keys or one_int else 0.0
    hashed = 0.0 if _fifo(side, e) or e.l >= FOREVER else ROW_HASH_BYTES
    return key + 8.0 + index + hashed


def _join_stored(side: L.LogicalOp, e: Edge) -> float:
    """Rows a join side stores per current row of its input. A FIFO side drops expired rows
    from the front of its oldest run, which keeps them until the run merges with the younger
    ones (or half of it has expired): it merges once its current rows are at most
    MERGE_RATIO times theirs, i.e. when 1/(MERGE_RATIO + 1) of the side has expired from it,
    so between none and that share, half of it on average: 1 + 1/(2·(MERGE_RATIO + 1)).
    Another side consolidates its retractions away: its current rows. The project's own
    derivation (the paper's join keeps no expired element)."""
    return FIFO_STORED if _fifo(side, e) else 1.0


def _flow(e: Edge, stream: bool) -> float:
    """Rows per time unit on an edge: one per element of a stream, a `+` and a `−` per
    element of a relation."""
    return e.rate if stream else 2 * e.rate


def _pairs(op: L.LogicalOp, edges: list[Edge]) -> float:
    """A nested-loop join's candidate pairs per time unit: each arrival meets the other
    side's current contents (a hash join's are in its result rows)."""
    if isinstance(op, L.Join | SharedJoinOp) and not op.left_keys:
        a, b = edges
        return 2 * (a.rate * b.size + b.rate * a.size)
    return 0.0


def _side_window(win: SideWindow, e: Edge) -> tuple[Edge, float]:
    """A route side's window over a stream edge `e`, as a plain window's estimate: its
    relation's edge and the tuples it holds."""
    if e.rate == 0:
        return cm.EMPTY, 0.0
    if win.kind == "rows":
        return Edge(e.d, max(win.size * e.d, 1.0)), float(win.size)
    live, length, stay = range_window_edge(win.size, None, 1)
    return Edge(e.d / live, length), live * stay / e.d


def _buffers(op: SharedJoinOp, ins: list[OperatorEstimate]) -> list[OperatorEstimate]:
    """Each input's buffer as a window covering its largest window among the routes (the
    one holding the most tuples), with the tuples it holds in `rows`."""
    out = []
    for side, e in enumerate(ins):
        windows = [_side_window(r[side], e.edge) for r in op.routes]
        edge, rows = max(windows, key=lambda w: (w[1], w[0].l))
        out.append(replace(e, edge=edge, rows=rows))
    return out


def _shared_join(
    node: PhysicalNode,
    op: SharedJoinOp,
    ins: list[OperatorEstimate],
    obs: Observed,
    assumed: list[str],
) -> tuple[Edge, float, float, tuple[Edge, ...], str]:
    """A shared join (plan/shared_joins.py) over its two streams `ins`: its output edge (the
    join of each side's largest window: every route's pairs, each once), the tuples its
    buffers hold, their bytes per tuple, and each route's edge (its own windows' join)."""
    default = 0.1 if op.left_keys else 1.0  # the residual is applied above the routes
    sel = _selectivity(node, obs, assumed, default=default)
    a, b = _buffers(op, ins)
    routes = tuple(
        cm.cross(_side_window(wa, ins[0].edge)[0], _side_window(wb, ins[1].edge)[0], sel)
        for wa, wb in op.routes
    )
    key = 8.0 * len(op.left_keys) if op.left_keys else 1.0
    one_int = len(op.left_keys) == 1 and getattr(op.left_keys[0], "type", None) in (
        DataType.INT, DataType.TIMESTAMP)
    extra = key + 8.0 + (16.0 if not op.left_keys or one_int else 0.0) + 8.0  # key, w, index, ts
    # Each buffer drops its oldest tuples (JoinSide.drop_oldest): stored as a FIFO join side.
    state_bytes = _mean_bytes([(s.rows, FIFO_STORED * (s.column_bytes + extra)) for s in (a, b)])
    formula = (
        "engine: one buffer per stream covering its largest window (columns, key, weight, "
        "index, timestamp); output (4) over the largest windows, each route (4) over its own"
    )
    return cm.cross(a.edge, b.edge, sel), a.rows + b.rows, state_bytes, routes, formula


def _selectivity(node: PhysicalNode, obs: Observed, assumed: list[str], default: float = DEFAULT_SELECTIVITY) -> float:
    s = obs.selectivity.get(node.id)
    if s is None:
        assumed.append(f"selectivity {default:g}")
        return default
    return s


def _join_default(op: L.Join) -> float:
    if not op.left_keys and op.residual is None:
        return 1.0  # a cross product
    return 0.1 if op.left_keys else DEFAULT_SELECTIVITY


def _groups(node: PhysicalNode, obs: Observed, assumed: list[str]) -> float:
    n = obs.groups.get(node.id)
    if n is None:
        assumed.append(f"{DEFAULT_GROUPS:g} keys")
        return DEFAULT_GROUPS
    return n


def _window(
    node: PhysicalNode,
    op: L.WindowOp,
    e: Edge,
    obs: Observed,
    windows: Mapping[int, tuple[int, int]],
    assumed: list[str],
) -> tuple[Edge, float, str]:
    w = op.window
    if e.rate == 0:
        return cm.EMPTY, 0.0, "empty input"
    if w.kind == "unbounded":
        return Edge(e.d, obs.elapsed), 0.0, "engine: an Unbounded window keeps nothing; its relation grows"
    if w.kind == "rows":
        n = float(w.n or 0)
        if not w.partition_by:
            return Edge(e.d, max(n * e.d, 1.0)), n, "paper: tuple window, M = c·s, l = c·d"
        parts = _groups(node, obs, assumed)
        return (
            Edge(e.d, max(n * e.d * parts, 1.0)),
            n * parts,
            "engine: c tuples per partition, l = c·d·partitions",
        )
    size, g = windows.get(node.id, (w.size or 0, w.granularity))
    live, length, stay = range_window_edge(size, w.slide, g)
    if live == 0:
        return cm.EMPTY, 0.0, "engine: Γ leaves nothing"
    edge = Edge(e.d / live, length, g)
    return edge, live * stay / e.d, "paper (7), (8) in discrete time; engine: tuples stored until they leave"


def range_window_edge(size: int, slide: int | None, g: int) -> tuple[float, float, float]:
    """A Range window's effect on a stream of one-unit elements, exactly for integer time:
    (share of tuples that survive Γ, mean validity length of those, mean time a survivor is
    stored: waiting to enter plus waiting to leave). Averaged over the timestamp's residue
    modulo the window's period (lcm of slide and g), all residues equally likely."""
    period = math.lcm(slide or 1, g)
    if period <= _ENUMERATION_LIMIT:
        t = np.arange(period, dtype=np.int64)
    else:
        t = np.unique(np.linspace(0, period - 1, _ENUMERATION_LIMIT).astype(np.int64))
    t = t + period * 1_000  # away from zero: floor division behaves the same everywhere
    if slide:
        enter = -((-t) // slide) * slide
        leave = ((t + size) // slide + 1) * slide
    else:
        enter, leave = t, t + size + 1
    if g > 1:
        enter = -((-enter) // g) * g
        leave = (leave // g) * g
    live = enter < leave
    if not live.any():
        return 0.0, 0.0, 0.0
    length = float((leave - enter)[live].mean())
    stay = float(((enter - t) + (leave - t))[live].mean())
    return float(live.mean()), length, stay


def _aggregate(
    node: PhysicalNode, op: L.Aggregate, e: Edge, obs: Observed, assumed: list[str]
) -> tuple[Edge, float, str]:
    n_in = e.size
    values = values_kept(op, n_in)
    note = "; MIN/MAX/DISTINCT keep ≤ N values" if any(a.keeps_values for a in op.aggs) else ""
    if not op.keys:
        edge = cm.aggregate(e, poisson=True)
        return edge, 1.0 + values, "paper (5), Poisson form; engine: one state (the window keeps the tuples)" + note
    n = _groups(node, obs, assumed)
    rows = groups_present(n, n_in)
    edge = cm.group_by(e, max(1, round(n)), poisson=True) if math.isfinite(n) else e
    return edge, rows + values, "paper (6), Poisson form; engine: groups present, n(1 − e^(−N/n))" + note


def values_kept(op: L.Aggregate, elements: float) -> float:
    """Values an aggregate's MIN, MAX and DISTINCT keep over `elements` input rows (at most
    one per row each; the estimate takes the bound)."""
    return elements * sum(1 for a in op.aggs if a.keeps_values)


def _to_stream(op: L.RelToStream, e: Edge) -> tuple[Edge, float, str]:
    if op.op == "rstream":
        n = e.size
        d = 1.0 / n if n > 0 else math.inf
        return Edge(d, 1.0), n, "engine: Rstream emits the whole relation every instant"
    # Istream (Dstream) emits each element once, at its start (end): a stream at the same rate,
    # buffering the current instant's changes.
    return Edge(e.d, 1.0), 2 * e.rate, "engine: one element per + (−); buffers one instant"


def groups_present(n: float, elements: float) -> float:
    """Distinct keys among `elements` drawn (Poisson) from `n` equally likely keys:
    n(1 − e^(−N/n)); every element its own key when n is infinite."""
    if elements <= 0 or n <= 0:
        return 0.0
    if not math.isfinite(n):
        return elements
    return n * -math.expm1(-elements / n)


def solve_groups(present: float, elements: float) -> float:
    """The number of equally likely keys n for which `elements` draws show `present`
    distinct ones on average (inverse of `groups_present`); inf when they are all distinct.

    >>> round(solve_groups(groups_present(50, 1000), 1000), 6)
    50.0
    """
    if present <= 0 or elements <= 0:
        return 0.0
    if present >= elements * 0.999:
        return math.inf
    lo, hi = present, present * 2
    while groups_present(hi, elements) < present:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if groups_present(mid, elements) < present:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
