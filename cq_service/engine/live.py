"""An engine whose queries change while it runs (the worker's engine).

Sources are shared by every query that reads them and live as long as the worker. Queries come
in groups — the queries of one deployment change — planned together, so equal subplans within a
group run once; groups share only the sources. Each group reads a source through a `Gate`, so a
query added while the engine runs starts at the source's current time (and a restarted worker
can rebuild it exactly). Removing a query removes the operators no remaining query of its group
uses; the other queries and their state are untouched.

`snapshot` saves the state of every source and every group's operators at a consistent cut (the
engine quiesced: every queue empty); `restore_source` and `restore_group` load it into a new
engine, rebuilding each group from the very plan it ran, so operator ids and sharing are the
same (docs/service.md, "State snapshots").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cq_service.cql import logical as L
from cq_service.engine.adjust import Adjustment, adjust, adjustable, replay
from cq_service.engine.batch import Batch
from cq_service.engine.build import (
    SourceOptions,
    make_operator,
    make_source,
    publish_statistics,
)
from cq_service.engine.executor import Executor
from cq_service.engine.filter_order import OrdererFactory
from cq_service.engine.join_constraints import AdherenceFactory, Declared
from cq_service.engine.operators.base import NEVER, Operator, StateMismatch
from cq_service.engine.operators.gate import Gate
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.engine.operators.sink import ResultWriter, SinkOperator
from cq_service.engine.operators.source import ChunkReader, DeadLetters, SourceOperator
from cq_service.engine.queues import Queue
from cq_service.engine.scheduler import SchedulingPolicy
from cq_service.engine.statistics import EntitySource
from cq_service.plan.physical import PhysicalPlan

__all__ = ["EngineState", "GroupState", "LiveEngine"]


@dataclass
class GroupState:
    """One group of queries at a snapshot: the plan it was built from and how, the queries
    still running in it, and the state of its running operators (by plan node id) and sinks."""

    owner: str
    plan: PhysicalPlan
    source_keys: dict[str, str]
    gates: dict[str, int]
    queries: list[str]
    nodes: dict[int, dict[str, Any]]
    sinks: dict[str, dict[str, Any]]


@dataclass
class EngineState:
    """The engine at a consistent cut: every source's state (by source key) and every group's."""

    sources: dict[str, dict[str, Any]]
    groups: list[GroupState]

    def group_of(self, query: str) -> GroupState | None:
        return next((g for g in self.groups if query in g.queries), None)


@dataclass
class _Group:
    """Operators added together, from `plan`; `owners[id(op)]` are the queries still using
    op, `by_node` the running operators by plan node id."""

    plan: PhysicalPlan
    source_keys: dict[str, str] = field(default_factory=dict)
    gates: dict[str, int] = field(default_factory=dict)
    owner: str = ""
    operators: list[Operator] = field(default_factory=list)
    queues: dict[int, Queue] = field(default_factory=dict)  # id(op) -> its output queue
    owners: dict[int, set[str]] = field(default_factory=dict)
    by_node: dict[int, Operator] = field(default_factory=dict)


class LiveEngine:
    def __init__(
        self,
        policy: SchedulingPolicy | None = None,
        budget: int = 65_536,
        step_seconds: float | None = None,
    ):
        self.executor = Executor([], [], policy, budget, step_seconds)
        self.sources: dict[str, SourceOperator] = {}  # by source key
        self._groups: list[_Group] = []
        self._group_of: dict[str, _Group] = {}  # query -> its group
        self.sinks: dict[str, SinkOperator] = {}  # query -> its sink
        self._serial = 0  # groups added so far
        # entities SysStream publishes besides the engine's (the worker's resource manager)
        self.entity_sources: list[EntitySource] = []

    # -- sources --------------------------------------------------------------------------------

    def add_source(
        self,
        key: str,
        source: L.Source,
        reader: ChunkReader,
        options: SourceOptions,
        dead_letters: DeadLetters | None = None,
    ) -> SourceOperator:
        op = make_source(source, Queue(f"source {key}"), reader, options, dead_letters)
        op.out_types = [f.type for f in source.schema]
        self.sources[key] = op
        self._rebuild()
        publish_statistics(self.executor, extra=self.entity_sources)  # SysStream's source
        return op

    def remove_source(self, key: str) -> SourceOperator:
        op = self.sources.pop(key)
        self._rebuild()
        return op

    def readers_of(self, key: str) -> int:
        """Operators reading source `key`."""
        return self.sources[key].output.readers

    # -- queries --------------------------------------------------------------------------------

    @property
    def queries(self) -> list[str]:
        return list(self._group_of)

    def add_queries(
        self,
        plan: PhysicalPlan,
        source_keys: Mapping[str, str],
        writers: Mapping[str, ResultWriter],
        start_after: Mapping[str, int] | None = None,
        owner: str = "",
        filter_order: OrdererFactory | None = None,
        constraints: Declared | None = None,
        adherence: AdherenceFactory | None = None,
    ) -> dict[str, int]:
        """Start the queries of `plan` (named in its nodes and sinks); `source_keys` maps the
        plan's source names to running sources. `start_after` (source key -> instant) rebuilds
        queries that started while an earlier worker ran; None starts them now. `owner` (the
        deployment) tags the operators for per-deployment scheduling (`ByOwner`). Returns the
        instants used, to be kept with the queries. `filter_order` orders each selection's
        conjuncts (None: as written); `constraints` are the deployment's k-constraints, which
        its two-way joins and partitioned windows use (`adherence`: k-Mon for `k: auto`)."""
        self._serial += 1
        group = _Group(plan, dict(source_keys), owner=owner)
        gates = group.gates
        built: dict[int, Operator] = {}
        for node in plan.nodes:
            out = Queue(f"q{len(self._groups)}.{node.id}")
            if isinstance(node.op, L.Source):
                key = source_keys[node.op.name]
                src = self.sources[key]
                w = src.watermark if start_after is None else start_after.get(key, NEVER)
                gates[key] = w
                snapshot = None
                if start_after is None and src.is_relation and w != NEVER:
                    snapshot = _relation_batch(src, w + 1)
                op: Operator = Gate(
                    f"g{self._serial} gate {node.op.name}",
                    [src.output.reader()],
                    out,
                    start_after=w,
                    is_relation=src.is_relation,
                    snapshot=snapshot,
                )
                op.out_types = node.types
            else:
                ins = [group.queues[id(built[i])].reader() for i in node.inputs]
                op = make_operator(node, ins, out, filter_order, constraints, adherence)
                op.name = f"g{self._serial}{op.name}"  # unique across groups
            op.owner = owner
            built[node.id] = op
            group.by_node[node.id] = op
            group.operators.append(op)
            group.queues[id(op)] = out
            group.owners[id(op)] = set(node.queries)
        for s in plan.sinks:
            upstream = built[s.input]
            canonical = s.sink.type != "blackhole"
            sink = SinkOperator(
                s.query, [group.queues[id(upstream)].reader()], writers[s.query], s.is_stream,
                canonical,
            )
            sink.out_types = s.types
            sink.owner = owner
            group.operators.append(sink)
            group.queues[id(sink)] = sink.output
            group.owners[id(sink)] = {s.query}
            self.sinks[s.query] = sink
        for q in {q for owners in group.owners.values() for q in owners}:
            if q in self._group_of:
                raise ValueError(f"query {q!r} is already running")
            self._group_of[q] = group
        self._groups.append(group)
        self._rebuild()
        return gates

    def remove_query(self, query: str, close_sink: bool = True) -> ResultWriter | None:
        """Stop `query`: flush and close its sink (`close_sink` False: return its writer for
        the caller to finish), drop operators no other query uses."""
        group = self._group_of.pop(query)
        sink = self.sinks.pop(query, None)
        writer = None if sink is None else sink.writer
        if writer is not None and close_sink:
            writer.flush()
            writer.close()
        keep: list[Operator] = []
        for op in group.operators:
            owners = group.owners[id(op)]
            owners.discard(query)
            if owners:
                keep.append(op)
                continue
            for r in op.inputs:
                r.queue.detach(r)
            del group.owners[id(op)], group.queues[id(op)]
        group.by_node = {n: op for n, op in group.by_node.items() if id(op) in group.owners}
        group.operators = keep
        if not keep:
            self._groups.remove(group)
        self._rebuild()
        return None if close_sink else writer

    def plan_of(self, query: str) -> tuple[PhysicalPlan, dict[int, Operator]]:
        """The plan `query` was added with (shared with the queries added with it) and the
        operators still running, by plan node id; a `Source` node's is the query's gate."""
        group = self._group_of[query]
        return group.plan, group.by_node

    # -- state snapshots ------------------------------------------------------------------------

    def quiesce(self) -> None:
        """Run every operator but the sources until no queue holds anything: an operator the
        scheduler passes over (waiting for another input's time, or held by backpressure)
        reads what waits for it into its own buffers, which are state."""
        ex = self.executor
        while True:
            ex.drain()
            waiting = [op for op in ex.downstream if op.runnable()
                       or any(r.pending() for r in op.inputs)]
            if not waiting:
                return
            for op in waiting:
                op.run(ex.budget)

    def snapshot(self) -> EngineState:
        """Quiesce, then the state of every source and group (live references: serialise them
        before the engine runs again)."""
        self.quiesce()
        groups = []
        for g in self._groups:
            queries = sorted({q for owners in g.owners.values() for q in owners})
            sinks = {q: s.snapshot() for q, s in self.sinks.items() if self._group_of[q] is g}
            nodes = {n: op.snapshot() for n, op in g.by_node.items()}
            groups.append(GroupState(g.owner, g.plan, dict(g.source_keys),
                                     {k: int(v) for k, v in g.gates.items()}, queries, nodes,
                                     sinks))
        return EngineState({k: op.snapshot() for k, op in self.sources.items()}, groups)

    def restore_source(self, key: str, state: dict[str, Any]) -> None:
        """Load a source's saved state (before any query reads it)."""
        self.sources[key].restore(state)

    def restore_group(
        self,
        state: GroupState,
        writers: Mapping[str, ResultWriter],
        keep: Collection[str],
        filter_order: OrdererFactory | None = None,
        constraints: Declared | None = None,
        adherence: AdherenceFactory | None = None,
    ) -> dict[str, int]:
        """Rebuild a saved group from its own plan, load its operators' state, and keep only
        the queries in `keep` (a subset of `state.queries`; the others are removed, with the
        operators only they used). `writers` are the kept queries' result writers."""
        extra = set(keep) - set(state.queries)
        if extra:
            raise ValueError(f"queries {sorted(extra)} are not in the saved group")
        all_writers = {s.query: writers.get(s.query) or _Discard() for s in state.plan.sinks}
        gates = self.add_queries(state.plan, state.source_keys, all_writers, state.gates,
                                 owner=state.owner, filter_order=filter_order,
                                 constraints=constraints, adherence=adherence)
        group = self._group_of[state.plan.sinks[0].query]
        for node, saved in state.nodes.items():
            op = group.by_node.get(node)
            if op is None:
                raise StateMismatch(f"saved state for node {node}, which the plan lacks")
            op.restore(saved)
        for query, saved in state.sinks.items():
            self.sinks[query].restore(saved)
        for q in [s.query for s in state.plan.sinks if s.query not in keep]:
            self.remove_query(q)
        return gates

    # -- window adjustments ---------------------------------------------------------------------

    def windows(self, deployment: str, query: str) -> list[RangeWindow]:
        """The adjustable windows of `query` in `deployment`."""
        return adjustable(self.operators_of(deployment), query)

    def adjust(
        self, deployment: str, query: str, knob: str, value: int, reason: str = ""
    ) -> list[Adjustment]:
        """Change a window knob of a running query as soon as its windows can (adjust.py)."""
        return adjust(self.operators_of(deployment), query, knob, value, reason=reason)

    def replay(self, deployment: str, records: list[Adjustment]) -> list[Adjustment]:
        """Make a query's logged changes again at their instants (a restored query, before it
        reads anything)."""
        return replay(self.operators_of(deployment), records)

    def queued_of(self, deployment: str) -> int:
        """Bytes waiting for `deployment`'s operators: in its queues, and in the sources'
        queues not yet read by its gates."""
        total = 0
        for g in self._groups:
            if g.owner != deployment:
                continue
            total += sum(q.bytes for q in g.queues.values())
            for op in g.operators:
                if isinstance(op, Gate):
                    total += sum(r.pending_bytes() for r in op.inputs)
        return total

    def operators_of(self, deployment: str) -> list[Operator]:
        """The operators of `deployment`'s queries (not the shared sources)."""
        return [op for g in self._groups for op in g.operators if op.owner == deployment]

    def _rebuild(self) -> None:
        ops: list[Operator] = list(self.sources.values())
        queues = [s.output for s in self.sources.values()]
        for g in self._groups:
            ops.extend(g.operators)
            queues.extend(g.queues.values())
        self.executor.replace_plan(ops, queues)


def _relation_batch(src: SourceOperator, ts: int) -> Batch:
    """A relation source's current content, every tuple stamped `ts`."""
    tuples = [row for row, n in src.relation_content() for _ in range(n)]
    return Batch.from_rows(tuples, [ts] * len(tuples), [1] * len(tuples), src.out_types)


class _Discard:
    """The writer of a restored group's query that is not kept: it is removed at once."""

    def write(self, ts: np.ndarray, ops: np.ndarray, columns: Any) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
