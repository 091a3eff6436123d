"""Running a compiled pipeline on files: io attached to the engine."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from cq_service.adaptive.filter_order import pipeline_orderers
from cq_service.adaptive.k_constraints import monitor_adherence
from cq_service.compiler import CompiledPipeline, run_plan
from cq_service.cql.logical import Source
from cq_service.engine.adjust import Adjustment
from cq_service.engine.build import SourceOptions, build_executor
from cq_service.engine.executor import Executor
from cq_service.engine.join_constraints import declared
from cq_service.engine.scheduler import policy as make_policy
from cq_service.io import open_sink, open_source
from cq_service.io.base import DeadRecord, LateElement, Sink, SourceReader
from cq_service.io.dead_letter import DeadLetterSink
from cq_service.spec.model import TIME_UNITS, PipelineSpec

__all__ = ["DeadLetterRouter", "RunReport", "run_pipeline", "scheduler_of"]


@dataclass
class RunReport:
    seconds: float
    executor: Executor
    dead_letter_count: int
    dead_letter_path: str | None
    sources: dict[str, dict[str, int]] = field(default_factory=dict)
    sinks: dict[str, int] = field(default_factory=dict)


class DeadLetterRouter:
    """The engine's dead-letter seam, writing to the pipeline's dead-letter sink."""

    def __init__(self, sink: DeadLetterSink, columns: dict[str, list[str]]):
        self.sink = sink
        self.columns = columns

    def dead(self, records: list[DeadRecord]) -> None:
        self.sink.write(records)

    def late(self, source: str, rows: list[tuple], ts: list[int], reasons: list[str]) -> None:
        names = self.columns.get(source, [])
        self.sink.write(
            LateElement(source, t, dict(zip(names, row)), reason)
            for row, t, reason in zip(rows, ts, reasons)
        )


SinkObserver = Callable[[str, np.ndarray], None]


class _ObservedSink:
    """A sink that tells an observer the timestamps of every group of elements it writes."""

    def __init__(self, query: str, sink: Sink, observer: SinkObserver):
        self._query, self._sink, self._observer = query, sink, observer

    def write(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> None:
        self._sink.write(ts, ops, columns)
        self._observer(self._query, ts)

    def __getattr__(self, name: str) -> object:
        return getattr(self._sink, name)


def run_pipeline(
    compiled: CompiledPipeline,
    *,
    policy: str | None = None,
    latency_bound: float | None = None,
    share: float | None = None,
    batch_rows: int = 65_536,
    observer: SinkObserver | None = None,
    adjustments: Sequence[Adjustment] = (),
    after_step: Callable[[Executor], None] | None = None,
    cpu_time: bool = False,
    open_reader: Callable[..., SourceReader] = open_source,
    panes: bool = True,
    filter_order: str | None = None,
) -> RunReport:
    """Run a compiled pipeline on its files until every source is exhausted.

    `policy` (with `latency_bound` in seconds for chain_bounded, `share` for chain_share)
    overrides the pipeline's `resources.scheduler`. Each operator runs at most `batch_rows`
    elements per step.
    `observer(query, ts)`, if given, is called after each write to a query's sink with the
    timestamps written (the benchmark measures latency with it). `adjustments` (a worker's
    log) are replayed at their instants; `after_step(executor)` is called after every step.
    The changes made are in `report.executor.adjustments`. `cpu_time`: operators' busy time is
    the thread's CPU time, not wall time (the cost model's benchmarks on a shared machine).
    `open_reader` opens each source (`open_source`'s signature; `cq bench kafka`'s latency phase
    opens live Kafka readers that end after a given number of messages).
    `panes`: run `run_plan(compiled)` (paned aggregates, shared joins); meters that map
    operators to `compiled.plan`'s nodes turn it off and run that plan as it is.
    `filter_order` overrides the pipeline's `resources.filter_order`."""
    spec = compiled.spec
    if policy is None:
        policy, latency_bound, share = scheduler_of(spec)
    inputs = {**spec.streams, **spec.relations}
    readers = {}
    options = {}
    columns = {}
    for node in compiled.plan.nodes:
        if isinstance(node.op, Source):
            s = inputs[node.op.name]
            readers[s.name] = open_reader(
                s, spec.time_unit, batch_rows, columns=compiled.plan.source_columns.get(s.name)
            )
            options[s.name] = SourceOptions(s.is_relation, s.max_delay, s.late, s.heartbeat)
            columns[s.name] = [f.name for f in s.schema]
    writers = {
        s.query: open_sink(s.sink, list(s.columns), s.types) for s in compiled.plan.sinks
    }
    if observer is not None:
        writers = {q: _ObservedSink(q, w, observer) for q, w in writers.items()}
    dead_sink = DeadLetterSink(spec.dead_letter)
    executor = build_executor(
        run_plan(compiled) if panes else compiled.plan,
        readers=readers,
        writers=writers,
        options=options,
        dead_letters=DeadLetterRouter(dead_sink, columns),
        policy=make_policy(policy, latency_bound, share),
        budget=batch_rows,
        filter_order=pipeline_orderers(spec, filter_order),
        pipeline=spec.name,
        constraints=declared(spec.streams, spec.queries),
        adherence=monitor_adherence,
    )
    if cpu_time:
        executor.clock = time.thread_time
    start = time.perf_counter()
    try:
        executor.replay(list(adjustments))
        executor.run(after_step)
    finally:
        for r in readers.values():
            r.close()
        dead_sink.close()
    seconds = time.perf_counter() - start
    report = RunReport(seconds, executor, dead_sink.count, dead_sink.path)
    for src in executor.sources:
        report.sources[src.name] = {
            "elements": src.rows_in,
            "late": src.late_count,
            "malformed": src.malformed_count,
        }
    for sink in executor.sinks:
        report.sinks[sink.name] = sink.written
    return report


def scheduler_of(spec: PipelineSpec) -> tuple[str, float | None, float | None]:
    """The pipeline's scheduling policy, its latency bound in seconds (chain_bounded) and its
    share of FIFO steps (chain_share)."""
    res = spec.resources
    bound = res.latency_bound
    seconds = None if bound is None else bound * TIME_UNITS[spec.time_unit] / 1e9
    return res.scheduler, seconds, res.share
