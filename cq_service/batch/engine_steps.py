"""A query's engine kept between the Spark runner's micro-batches, one per bucket of keys.

The runner hashes a micro-batch's new elements on the key `partitioning.analyze` chose and
repartitions them into B Spark partitions (B = 1 on the single-key path); partition p is
bucket p. Every micro-batch runs one task per bucket, `step_runner`, which:

1. loads the bucket's `BucketState` (the engine's state snapshot, the elements that came
   ahead of the heartbeat, the heartbeat reached) from the query's state folder at version v,
   or uses the engine the same Python worker kept from version v (a cache: no load at all);
2. feeds the engine the new elements and the pending ones with timestamps <= W (the query's
   heartbeat), each stream in replay order, plus the stored relations' updates in
   (previous W, W]; keeps those after W pending;
3. moves every source's heartbeat to W and runs the engine until it is quiet: the sink
   releases the results of every instant <= W that is not out yet, and only those;
4. writes version v + 1 of the state (`p<bucket>.state`, with `p<bucket>.json`: elements fed,
   state bytes, seconds) and yields the results.

Every bucket steps at every heartbeat, so a window's expiry is emitted without new arrivals
for its key. The work of a step is the new elements plus loading and saving the bucket's state
(a copy of its arrays, not a recomputation): no element is replayed. The engine is the one
`LiveEngine` the worker runs, and its snapshots are the worker's: restoring one and going on
gives what one engine running straight through gives (tests/unit/engine/test_snapshots.py).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pickle
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.adaptive.filter_order import pipeline_orderers
from cq_service.adaptive.k_constraints import monitor_adherence
from cq_service.batch import engine_in_spark as eis
from cq_service.cql import logical as L
from cq_service.engine.build import SourceOptions
from cq_service.engine.join_constraints import declared
from cq_service.engine.live import EngineState, LiveEngine
from cq_service.engine.operators.base import NEVER
from cq_service.io.base import RawChunk
from cq_service.plan.physical import PhysicalPlan
from cq_service.spec.model import PipelineSpec, StreamSpec
from cq_service.types import arrow_type

__all__ = ["BucketState", "StepTask", "step_runner", "step_stats"]


@dataclass
class BucketState:
    """A bucket between two steps: the engine's snapshot (None before the first step), each
    stream's elements with timestamps after `beat` (Arrow IPC), and the heartbeat reached."""

    engine: EngineState | None = None
    pending: dict[str, bytes] = field(default_factory=dict)
    beat: int = int(NEVER)


@dataclass(frozen=True)
class StepTask:
    """One micro-batch's step of `query` in every bucket: read version `version` of the
    state under `folder` (-1: none yet), write version + 1, advance to `beat`."""

    spec: PipelineSpec
    query: str
    streams: tuple[str, ...]
    folder: str
    version: int
    token: str  # who wrote `version` (a kept engine must come from that very step)
    next_token: str
    beat: int
    buckets: int
    relations: dict[str, bytes] = field(default_factory=dict)
    batch_rows: int = 65_536

    def pickled(self) -> bytes:
        return pickle.dumps(self)


def version_dir(folder: str | Path, version: int) -> Path:
    return Path(folder) / f"v{version}"


class _Feed:
    """A source's reader the step fills: the chunks pushed, then empty chunks (a live source
    with nothing new), never the end of input."""

    def __init__(self, stream: StreamSpec):
        self.stream = stream
        self.types = [arrow_type(f.type) for f in stream.schema]
        self.chunks: deque[RawChunk] = deque()

    def push(self, table: pa.Table, beat: int, batch_rows: int) -> None:
        """`table`'s elements in chunks, then a heartbeat at `beat` (none before the first)."""
        reader = eis.TableReader(table, self.stream, beat, batch_rows)
        while (chunk := reader.read()) is not None:
            if chunk.heartbeat == NEVER:
                chunk = dataclasses.replace(chunk, heartbeat=None)
            self.chunks.append(chunk)

    def read(self) -> RawChunk:
        if self.chunks:
            return self.chunks.popleft()
        none = np.empty(0, dtype=np.int64)
        return RawChunk(tuple(pa.array([], type=t) for t in self.types), none,
                        none.astype(np.int8), none)


class BucketEngine:
    """`query`'s engine for one bucket: a `LiveEngine` whose sources the step feeds."""

    def __init__(self, spec: PipelineSpec, query: str, state: EngineState | None,
                 batch_rows: int):
        compiled = eis.compiled_query(spec, query)
        self.query = query
        self.batch_rows = batch_rows
        self.spec = compiled.spec
        self.engine = LiveEngine(budget=batch_rows)
        self.feeds: dict[str, _Feed] = {}
        inputs = {**self.spec.streams, **self.spec.relations}
        plan: PhysicalPlan = compiled.plan
        sink = next(s for s in plan.sinks if s.query == query)
        self.result_types = [arrow_type(t) for t in sink.types]
        for node in plan.nodes:
            if not isinstance(node.op, L.Source) or node.op.name in self.feeds:
                continue
            s = inputs[node.op.name]
            self.feeds[s.name] = _Feed(s)
            # Elements come in replay order, the driver having decided lateness.
            self.engine.add_source(s.name, node.op, self.feeds[s.name],
                                   SourceOptions(s.is_relation, 0, "drop", None))
        self.collect = eis.Collect(int(NEVER))
        writers = {s.query: self.collect if s.query == query else eis.Discard(int(NEVER))
                   for s in plan.sinks}
        orders = pipeline_orderers(self.spec)
        constraints = declared(self.spec.streams, self.spec.queries)
        if state is None:
            self.engine.add_queries(plan, {n: n for n in self.feeds}, writers, filter_order=orders,
                                    constraints=constraints, adherence=monitor_adherence)
        else:
            for key, saved in state.sources.items():
                self.engine.restore_source(key, saved)
            for group in state.groups:
                self.engine.restore_group(group, writers, group.queries, orders, constraints,
                                          monitor_adherence)

    def step(self, tables: dict[str, pa.Table], beat: int) -> tuple[pa.Table, int]:
        """Feed each source its table (replay order, every timestamp <= `beat`) and a
        heartbeat at `beat`; run until quiet. The results released, and the elements fed."""
        fed = 0
        for name, feed in self.feeds.items():
            table = tables.get(name)
            if table is None:
                table = eis.empty_elements(self.spec.streams.get(name)
                                            or self.spec.relations[name])
            fed += table.num_rows
            feed.push(table, beat, self.batch_rows)
        executor = self.engine.executor
        while any(f.chunks for f in self.feeds.values()):
            for op in executor.sources:
                if op.reader.chunks:
                    op.run(self.batch_rows)
            executor.drain()
        self.engine.quiesce()
        table = eis.result_table(self.collect, self.result_types)
        self.collect.parts.clear()
        if table.num_rows and pc.max(table.column("_ts")).as_py() > beat:
            raise RuntimeError(f"{self.query}: the engine released a result after its "
                               f"heartbeat {beat}")
        return table, fed

    def snapshot(self) -> EngineState:
        return self.engine.snapshot()


# The engine each Python worker kept after its last step of a bucket, by (state folder,
# bucket): (the token of the step that made it, the engine, the pending elements and heartbeat).
# A task reading the version that very step wrote goes on with it instead of loading the saved
# state; a step that was redone (another token) or failed (popped) makes the task load.
_KEPT: dict[tuple[str, int], tuple[str, BucketEngine, BucketState]] = {}
_KEEP_AT_MOST = 256


def _load(task: StepTask, bucket: int) -> tuple[BucketEngine, BucketState, bool]:
    """The bucket's engine at the task's version, and whether this worker had kept it."""
    kept = _KEPT.pop((task.folder, bucket), None)
    if kept is not None and task.version >= 0 and kept[0] == task.token:
        return kept[1], kept[2], True
    state = BucketState()
    if task.version >= 0:
        path = version_dir(task.folder, task.version) / f"p{bucket}.state"
        if path.exists():
            state = pickle.loads(path.read_bytes())
    return BucketEngine(task.spec, task.query, state.engine, task.batch_rows), state, False


def _due(state: BucketState, new: dict[str, pa.Table], task: StepTask
         ) -> dict[str, pa.Table]:
    """Each input's elements to feed now (timestamps <= the task's heartbeat, in replay
    order); what comes after stays pending in `state`."""
    feed: dict[str, pa.Table] = {}
    for name in task.streams:
        parts = [t for t in (eis.from_ipc(state.pending.get(name)), new.get(name))
                 if t is not None and t.num_rows]
        state.pending.pop(name, None)
        if not parts:
            continue
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        order = pc.sort_indices(table, sort_keys=[("_ts", "ascending"),
                                                  ("_partition", "ascending"),
                                                  ("_offset", "ascending")])
        table = table.take(order)
        ts = table.column("_ts").to_numpy()
        cut = int(np.searchsorted(ts, task.beat, side="right"))
        feed[name] = table.slice(0, cut)
        if cut < table.num_rows:
            state.pending[name] = eis.to_ipc(table.slice(cut))
    for name, data in task.relations.items():
        table = eis.from_ipc(data)
        if table is None:
            continue
        ts = table.column("_ts").to_numpy()
        keep = (ts > state.beat) & (ts <= task.beat)
        if keep.any():
            feed[name] = table.filter(pa.array(keep))
    return feed


def step_runner(task_bytes: bytes) -> Callable[[Iterable[pa.RecordBatch]],
                                               Iterator[pa.RecordBatch]]:
    """The function `mapInArrow` runs on every bucket (see the module docstring). A partial of
    a module-level function, so that Spark pickles it by reference and the task runs with this
    module's globals: a closure would be pickled with a copy of `_KEPT`."""
    return functools.partial(_step, task_bytes)


def _step(task_bytes: bytes, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext

    started = time.perf_counter()
    task: StepTask = pickle.loads(task_bytes)
    bucket = TaskContext.get().partitionId()
    if bucket >= task.buckets:
        raise RuntimeError(f"{task.query}: partition {bucket} of {task.buckets} buckets")
    batches = list(batches)
    rows = pa.Table.from_batches(batches) if batches else None
    engine, state, kept = _load(task, bucket)
    new = eis.split_streams(rows, task.spec, task.streams, ("_ts", "_partition", "_offset"))
    feed = _due(state, new, task)
    result, fed = engine.step(feed, task.beat)
    state.beat = task.beat
    state.engine = engine.snapshot()
    data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    folder = version_dir(task.folder, task.version + 1)
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomic(folder / f"p{bucket}.state", data)
    stats = {"fed": fed, "new": 0 if rows is None else rows.num_rows,
             "state_bytes": len(data), "kept": int(kept),
             "seconds": time.perf_counter() - started}
    _write_atomic(folder / f"p{bucket}.json", json.dumps(stats).encode())
    state.engine = None  # the kept engine is the state; the snapshot was for the file
    if len(_KEPT) >= _KEEP_AT_MOST:
        _KEPT.clear()
    _KEPT[(task.folder, bucket)] = (task.next_token, engine, state)
    yield from result.to_batches(max_chunksize=65_536)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def step_stats(folder: str | Path, version: int) -> dict[str, int | float]:
    """The buckets' figures of the step that wrote `version`, summed: elements fed, new
    elements, state bytes, buckets whose engine the worker had kept (not loaded), task
    seconds (the longest)."""
    total: dict[str, int | float] = {"fed": 0, "new": 0, "state_bytes": 0, "kept": 0,
                                     "buckets": 0, "seconds": 0.0}
    for path in sorted(version_dir(folder, version).glob("p*.json")):
        stats = json.loads(path.read_text())
        total["buckets"] += 1
        for k in ("fed", "new", "state_bytes", "kept"):
            total[k] += stats[k]
        total["seconds"] = max(total["seconds"], stats["seconds"])
    return total
