"""Instantiate a physical plan: one operator per node, queues between them, sinks at the roots.

The caller supplies the outside world: a chunk reader per source, a result writer per sink,
each stream's time options, and where dead letters go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cq_service.cql import logical as L
from cq_service.engine.cache_policy import CacheSelector
from cq_service.engine.cluster_constraints import partition_constraint
from cq_service.engine.executor import Executor
from cq_service.engine.filter_order import OrdererFactory
from cq_service.engine.join_constraints import AdherenceFactory, Declared, join_constraint
from cq_service.engine.operators.aggregate import Aggregate
from cq_service.engine.operators.base import Operator
from cq_service.engine.operators.clock import Clock
from cq_service.engine.operators.distinct import Distinct
from cq_service.engine.operators.dstream import Dstream
from cq_service.engine.operators.group_table import GroupTable
from cq_service.engine.operators.istream import Istream
from cq_service.engine.operators.join import Join
from cq_service.engine.operators.mark_join import MarkJoin
from cq_service.engine.operators.mjoin import MJoin
from cq_service.engine.operators.paned_aggregate import PanedAggregate
from cq_service.engine.operators.project import Project
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.engine.operators.rows_window import PartitionRowsWindow, RowsWindow
from cq_service.engine.operators.rstream import Rstream
from cq_service.engine.operators.sample import Sample
from cq_service.engine.operators.select import Select
from cq_service.engine.operators.shared_join import SharedJoin, SharedJoinRoute
from cq_service.engine.operators.sink import ResultWriter, SinkOperator
from cq_service.engine.operators.source import ChunkReader, DeadLetters, SourceOperator
from cq_service.engine.operators.sys_stream import SysStreamSource
from cq_service.engine.operators.unbounded_window import UnboundedWindow
from cq_service.engine.operators.view import ViewBoundary
from cq_service.engine.probe_order import ProbeOrderer
from cq_service.engine.queues import Queue, QueueReader
from cq_service.engine.scheduler import SchedulingPolicy
from cq_service.engine.statistics import EntitySource, EntityStatistics
from cq_service.plan.mjoins import MJoinOp
from cq_service.plan.panes import PanedAggregateOp
from cq_service.plan.physical import PhysicalNode, PhysicalPlan
from cq_service.plan.shared_joins import SharedJoinOp, SharedJoinRouteOp

__all__ = [
    "SourceOptions", "build_executor", "make_operator", "make_source", "publish_statistics"
]


@dataclass(frozen=True)
class SourceOptions:
    is_relation: bool = False
    max_delay: int = 0
    late: str = "drop"
    heartbeat: tuple[str, int] | None = None  # (field, offset): records carry heartbeats


def build_executor(
    plan: PhysicalPlan,
    *,
    readers: Mapping[str, ChunkReader],
    writers: Mapping[str, ResultWriter],
    options: Mapping[str, SourceOptions] | None = None,
    dead_letters: DeadLetters | None = None,
    policy: SchedulingPolicy | None = None,
    budget: int = 65_536,
    step_seconds: float | None = None,
    filter_order: OrdererFactory | None = None,
    pipeline: str = "",
    constraints: Declared | None = None,
    adherence: AdherenceFactory | None = None,
) -> Executor:
    """`filter_order` makes the orderer of each selection's conjuncts (None: as written);
    `pipeline` names the entities of the statistics SysStream publishes; `constraints` are
    the pipeline's k-constraints, which two-way joins use (`adherence` makes the k-Mon
    monitor of a `k: auto` one; engine/join_constraints.py)."""
    options = options or {}
    queues: dict[int, Queue] = {}
    operators: list[Operator] = []
    for node in plan.nodes:
        out = Queue(f"q{node.id}")
        queues[node.id] = out
        ins = [queues[i].reader() for i in node.inputs]
        op = _make(
            node, ins, out, readers, options, dead_letters, filter_order, constraints, adherence
        )
        op.out_types = node.types
        operators.append(op)
    for s in plan.sinks:
        canonical = s.sink.type != "blackhole"  # a sink that keeps nothing needs no order
        sink = SinkOperator(
            s.query, [queues[s.input].reader()], writers[s.query], s.is_stream, canonical
        )
        sink.out_types = s.types
        operators.append(sink)
    executor = Executor(operators, list(queues.values()), policy, budget, step_seconds)
    publish_statistics(executor, pipeline)
    return executor


def publish_statistics(
    executor: Executor, pipeline: str = "", extra: Sequence[EntitySource] = ()
) -> None:
    """Let every SysStream source of `executor` publish its statistics (engine/statistics.py),
    and `extra`'s entities with them."""
    for op in executor.sources:
        if isinstance(op, SysStreamSource) and op.publishes is None:
            op.publish_with(EntityStatistics(executor, pipeline, extra).snapshot)


def make_operator(
    node: PhysicalNode,
    ins: list[QueueReader],
    out: Queue,
    filter_order: OrdererFactory | None = None,
    constraints: Declared | None = None,
    adherence: AdherenceFactory | None = None,
) -> Operator:
    """The operator of a plan node other than a source, reading `ins`, writing `out`
    (`filter_order`, `constraints`, `adherence`: as `build_executor`'s)."""
    op = _make(node, ins, out, {}, {}, None, filter_order, constraints, adherence)
    op.out_types = node.types
    return op


def _make(
    node: PhysicalNode,
    ins: list[QueueReader],
    out: Queue,
    readers: Mapping[str, ChunkReader],
    options: Mapping[str, SourceOptions],
    dead_letters: DeadLetters | None,
    filter_order: OrdererFactory | None = None,
    constraints: Declared | None = None,
    adherence: AdherenceFactory | None = None,
) -> Operator:
    op = node.op
    name = f"#{node.id}"
    maker = _MAKERS[type(op)]
    return maker(
        op,
        name,
        ins,
        out,
        readers=readers,
        options=options,
        dead_letters=dead_letters,
        filter_order=filter_order,
        constraints=constraints,
        adherence=adherence,
    )


def _join(op: L.Join, name, ins, out, filter_order=None, constraints=None, adherence=None, **_):
    found = join_constraint(op, constraints or {})
    return Join(
        name, ins, out, op.left_keys, op.right_keys, op.residual, filter_order,
        constraint=None if found is None else found[0], adherence=adherence,
    )


def _source(op: L.Source, name, ins, out, *, readers, options, dead_letters, **_) -> Operator:
    return make_source(op, out, readers.get(op.name), options.get(op.name), dead_letters)


def make_source(
    op: L.Source,
    out: Queue,
    reader: ChunkReader | None,
    options: SourceOptions | None,
    dead_letters: DeadLetters | None,
) -> SourceOperator:
    """The operator reading source `op` with `reader` into `out`; a reader that carries a
    `statistics_interval` (io/system.py) makes SysStream's source."""
    names = [f.name for f in op.schema]
    interval = getattr(reader, "statistics_interval", None)
    if interval is not None:
        return SysStreamSource(op.name, out, int(interval), names)
    o = options or SourceOptions(is_relation=op.is_relation)
    heartbeat = None if o.heartbeat is None else (names.index(o.heartbeat[0]), o.heartbeat[1])
    return SourceOperator(
        op.name,
        out,
        reader,  # type: ignore[arg-type]
        is_relation=op.is_relation,
        max_delay=o.max_delay,
        late_policy=o.late,
        dead_letters=dead_letters,
        column_names=names,
        heartbeat=heartbeat,
    )


def _probe_orderer(orderers: OrdererFactory | None, n: int) -> ProbeOrderer | None:
    """An MJoin's probe orderer: from the factory's `probe_orders`, when it has one
    (engine/filter_order.py)."""
    make = getattr(orderers, "probe_orders", None)
    return None if make is None else make(n)


def _cache_selector(orderers: OrdererFactory | None, n: int) -> CacheSelector | None:
    """An MJoin's cache selector (`join: mjoin-caching`): the factory's `caches`, when it has
    one (adaptive/caching.py, injected with the orderers)."""
    make = getattr(orderers, "caches", None)
    return None if make is None else make(n)


def _window(op: L.WindowOp, name, ins, out, constraints=None, **_) -> Operator:
    w = op.window
    if w.kind == "unbounded":
        return UnboundedWindow(name, ins, out, w.where)
    if w.kind == "rows":
        if w.partition_by:
            found = partition_constraint(op, constraints or {})
            return PartitionRowsWindow(
                name, ins, out, w.n, w.partition_by, w.where,  # type: ignore[arg-type]
                cluster=None if found is None else found[0],
            )
        return RowsWindow(name, ins, out, w.n, w.where)  # type: ignore[arg-type]
    return RangeWindow(
        name, ins, out, w.size, w.slide, w.where, w.granularity, op.owner, op.names  # type: ignore[arg-type]
    )


def _paned(op: PanedAggregateOp, name, ins, out, **_) -> Operator:
    w, agg = op.window.window, op.aggregate
    return PanedAggregate(
        name, ins, out, w.size, w.slide, w.where, w.granularity,  # type: ignore[arg-type]
        agg.keys, agg.aggs, [f.type for f in op.window.schema],
    )


def _mark_join(op: L.MarkJoin, name, ins, out, **_) -> Operator:
    return MarkJoin(
        name,
        ins,
        out,
        mode=op.mode,
        left_types=[f.type for f in op.left.schema],
        right_types=[f.type for f in op.right.schema],
        probe=op.probe,
        op=op.op,
        left_keys=op.left_keys,
        right_keys=op.right_keys,
        correlation=op.correlation,
        default=op.default,
    )


def _rel_to_stream(op: L.RelToStream, name, ins, out, **_) -> Operator:
    if op.op == "rstream":
        return Rstream(name, ins, out)
    cls = Istream if op.op == "istream" else Dstream
    return cls(name, ins, out, input_distinct=_aggregate_changes(op.input))


def _aggregate_changes(op: L.LogicalOp) -> bool:
    """Whether `op`'s output is a grouped aggregate's changes, through filters and projections
    that keep every one of its columns: per group and instant at most one − and one + row, and
    different rows (the aggregate emits a change only when its row differs, and its rows hold
    the key; the aggregate types the group table keeps have no NaN and no 0.0 equal to -0.0,
    the values where Python's and Arrow's equality part)."""
    while isinstance(op, L.Filter | L.Project):
        if isinstance(op, L.Project):
            refs = {e.index for e in op.exprs if isinstance(e, L.ColRef)}
            if not refs >= set(range(len(op.input.schema))):
                return False
        op = op.input
    return isinstance(op, L.Aggregate) and bool(op.keys) and GroupTable.fits(op.keys, op.aggs)


_MAKERS: dict[type, Callable[..., Operator]] = {
    L.Source: _source,
    L.View: lambda op, name, ins, out, **_: ViewBoundary(op.name, ins, out, is_stream=op.is_stream),
    L.WindowOp: _window,
    L.Sample: lambda op, name, ins, out, **_: Sample(name, ins, out, op.percent, op.seed),
    L.Filter: lambda op, name, ins, out, filter_order=None, **_: Select(
        name, ins, out, op.predicate, filter_order
    ),
    L.Project: lambda op, name, ins, out, **_: Project(name, ins, out, op.exprs),
    L.Join: _join,
    L.MarkJoin: _mark_join,
    L.Aggregate: lambda op, name, ins, out, **_: Aggregate(
        name, ins, out, op.keys, op.aggs, [f.type for f in op.input.schema]
    ),
    PanedAggregateOp: _paned,
    MJoinOp: lambda op, name, ins, out, filter_order=None, **_: MJoin(
        name, ins, out, [len(i.schema) for i in op.inputs], op.edges, op.filters, op.orders,
        probe_orderer=_probe_orderer(filter_order, len(op.inputs)),
        cache_selector=_cache_selector(filter_order, len(op.inputs)) if op.caching else None,
    ),
    SharedJoinOp: lambda op, name, ins, out, **_: SharedJoin(
        name, ins, out, op.left_keys, op.right_keys, op.routes, op.policy, op.istream_routes
    ),
    SharedJoinRouteOp: lambda op, name, ins, out, **_: SharedJoinRoute(
        name, ins, out, op.index, op.windows
    ),
    L.Clock: lambda op, name, ins, out, **_: Clock(name, ins, out),
    L.Distinct: lambda op, name, ins, out, **_: Distinct(name, ins, out),
    L.SetOperation: lambda op, name, ins, out, **_: _set_op(op, name, ins, out),
    L.RelToStream: _rel_to_stream,
}


def _set_op(op: L.SetOperation, name, ins, out) -> Operator:
    from cq_service.engine.operators.set_operation import SetOperation

    return SetOperation(name, ins, out, op.op, op.all)
