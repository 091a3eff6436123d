"""Run a pipeline on the real engine with elements arriving in wall-clock time (the scheduling
benchmark, benchmarks/scheduling/bench.py, and `cq bench shared-joins`).

The engine loop is the live worker's, made explicit: between two scheduling steps, every
source takes what has arrived by now (one chunk per source), then the policy picks one
operator to run for one budget, cut as in the worker to about `STEP_SECONDS` of work. A poll's
elements are stamped with the arrival time of its oldest, so a result's latency is measured
from (no later than) the arrival of the input that completed it. The executor's memory
monitor records total queue memory after each step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from cq_service.adaptive.filter_order import pipeline_orderers
from cq_service.compiler import CompiledPipeline, load_and_compile
from cq_service.cql.logical import Source
from cq_service.engine.build import SourceOptions, build_executor
from cq_service.engine.latency import LatencyHistogram
from cq_service.engine.scheduler import policy as make_policy
from cq_service.io import open_sink, open_source
from cq_service.io.base import RawChunk
from cq_service.plan.physical import PhysicalPlan
from cq_service.service.config import ServiceConfig

__all__ = ["Arrivals", "Run", "run_shape"]

HEARTBEAT_S = 0.005  # a quiet stream says "nothing before now" this often
POLL_S = 0.002  # a source is read when its oldest unread element has waited this long ...
NETWORK_BATCH = 512  # ... or this many elements are waiting; a poll returns at most this many
# (as a Kafka consumer polls, max.poll.records), and a source takes every poll that is due
STEP_SECONDS = ServiceConfig().step_seconds  # the worker's: a step runs about this long
_WARM_UP = 1e9  # seconds the clock is held back while a warm-up enters


@dataclass
class Arrivals:
    """One stream's elements (an Arrow table in schema order) and their arrival times (s)."""

    table: pa.Table
    at: np.ndarray  # negative: a warm-up (see `run_shape`)
    ts: np.ndarray  # event timestamps, in the pipeline's time_unit, non-decreasing
    # Event time at second s of the run: origin + s × per_second (a quiet stream's heartbeat)
    ts_origin: int = 0
    ts_per_second: float = 1e6


class _ArrivalReader:
    """Hands the source whatever has arrived by now; None once everything has."""

    def __init__(self, arrivals: Arrivals, clock: list[float], poll_s: float = POLL_S):
        self.a = arrivals
        self.poll_s = poll_s
        self.clock = clock  # [start of the run, now], kept by the loop
        self.pos = 0
        self.heartbeat: int | None = None  # to send with the next (empty) chunk

    def _now(self) -> float:
        """Seconds since the run started; during a warm-up (the clock held back), just before
        0, so that every warm-up element (negative arrival time) has arrived and no other."""
        return max(self.clock[1] - self.clock[0], -1e-9)

    def due(self) -> bool:
        """Something has waited a poll interval, or a network batch is full."""
        if self.pos >= len(self.a.at):
            return False
        now = self._now()
        if self.a.at[self.pos] <= now - self.poll_s or self.a.at[self.pos] < 0:
            return True
        last = self.pos + NETWORK_BATCH - 1
        return last < len(self.a.at) and self.a.at[last] <= now

    def done(self) -> bool:
        return self.pos >= len(self.a.at)

    def read(self) -> RawChunk | None:
        if self.done():
            return None
        end = int(np.searchsorted(self.a.at, self._now(), side="right"))
        end = min(end, self.pos + NETWORK_BATCH)  # one poll returns at most a network batch
        start, self.pos = self.pos, max(end, self.pos)
        cols = tuple(c.combine_chunks() for c in self.a.table.slice(start, self.pos - start).columns)
        n = self.pos - start
        hb, self.heartbeat = self.heartbeat, None
        return RawChunk(
            cols,
            self.a.ts[start:self.pos],
            np.ones(n, dtype=np.int8),
            np.arange(start, self.pos, dtype=np.int64),
            arrived=(self.clock[0] + float(self.a.at[start]) if n and self.a.at[start] >= 0
                     else time.perf_counter()),
            heartbeat=hb if n == 0 else None,
        )

    def close(self) -> None:
        pass


@dataclass
class Run:
    policy: str
    seconds: float
    trace: list[tuple[float, int, int]]  # (s, queue rows, queue bytes) after each step
    peak_bytes: int
    average_bytes: float
    peak_rows: int
    latency: LatencyHistogram
    results: int
    steps: int
    utilisation: float  # fraction of the run's wall-clock time spent doing work, not waiting
    # Per query: result latencies (after the warm-up) and the peak of the operators'
    # synopses (state, not queues) over the run.
    latencies: dict[str, LatencyHistogram] = field(default_factory=dict)
    peak_state_bytes: int = 0


def run_shape(
    pipeline: Path,
    arrivals: dict[str, Arrivals],
    policy: str,
    *,
    budget: int = 1024,
    bound: float | None = None,
    share: float | None = None,
    plan: Callable[[CompiledPipeline], PhysicalPlan] | None = None,
    poll_s: float = POLL_S,
    heartbeat_s: float = HEARTBEAT_S,
) -> Run:
    """Run `pipeline` (its plan, or `plan(compiled)`) on `arrivals` under `policy`. Elements
    with a negative arrival time are a warm-up (a preload of history): they enter at once, and
    the run's clock starts at 0 once they have all entered and the engine is idle; latencies
    and the run's time count from then (each stream first heartbeats up to its `ts_origin`, so
    that no preload result is counted). `poll_s` and `heartbeat_s` set how often sources are
    read and quiet streams heartbeat (the defaults above)."""
    compiled = load_and_compile(pipeline)
    spec = compiled.spec
    clock = [0.0, 0.0]
    arriving = {name: _ArrivalReader(a, clock, poll_s) for name, a in arrivals.items()}
    readers: dict = dict(arriving)
    options = {}
    for node in compiled.plan.nodes:
        if isinstance(node.op, Source):
            options[node.op.name] = SourceOptions(node.op.is_relation)
            if node.op.name not in readers:  # stored relations: read from their files
                readers[node.op.name] = open_source(spec.relations[node.op.name], spec.time_unit)
    writers = {s.query: open_sink(s.sink, list(s.columns), s.types) for s in compiled.plan.sinks}
    ex = build_executor(
        compiled.plan if plan is None else plan(compiled), readers=readers, writers=writers, options=options,
        policy=make_policy(policy, bound, share), budget=budget, step_seconds=STEP_SECONDS,
        filter_order=pipeline_orderers(spec),
    )
    for src in ex.sources:  # relations are loaded before the first arrival
        while src.name not in arriving and not src.exhausted:
            ex.step(src)
    sources = [(s, arriving[s.name]) for s in ex.sources if s.name in arriving]
    warming = any(len(r.a.at) and r.a.at[0] < 0 for _, r in sources)
    clock[0] = clock[1] = time.perf_counter()
    if warming:  # until the warm-up is in, "now" is far before every measured arrival
        clock[0] += _WARM_UP
    ex.memory.restart(trace=True)
    idle = 0.0  # time in loop turns that found nothing to do
    preload_closed = False  # the streams have said "nothing more before the measured part"
    state_peak = 0
    while True:
        clock[1] = turn = time.perf_counter()
        state_peak = max(state_peak, ex.memory.synopsis_bytes)
        worked = False
        for src, reader in sources:
            if reader.due() or (reader.done() and not src.exhausted):
                while reader.due():  # everything that has arrived enters the engine
                    ex.step(src)
                if reader.done() and not src.exhausted:
                    ex.step(src)
                worked = True
                continue
            a = reader.a
            now_ts = a.ts_origin + int((clock[1] - clock[0]) * a.ts_per_second)
            if not reader.done() and now_ts - src.watermark > heartbeat_s * a.ts_per_second:
                reader.heartbeat = min(now_ts, int(a.ts[reader.pos])) - 1
                ex.step(src)  # time passes on a quiet stream too
        ex.follow_clocks()
        op = ex.policy.choose(ex.downstream)
        if op is not None:
            ex.step(op)
            continue
        if worked:
            continue
        if warming and all(r.done() or r.a.at[r.pos] >= 0 for _, r in sources):
            if not preload_closed:  # release every preload result before measuring
                for src, reader in sources:
                    if not reader.done():
                        a = reader.a
                        reader.heartbeat = min(a.ts_origin, int(a.ts[reader.pos])) - 1
                        ex.step(src)
                preload_closed = True
                continue
            clock[0] = time.perf_counter()  # the warm-up is in and done: the run starts
            for sink in ex.sinks:
                sink.latency = LatencyHistogram()
            ex.memory.restart(trace=True)
            idle, warming, state_peak = 0.0, False, ex.memory.synopsis_bytes
            continue
        if all(src.exhausted for src, _ in sources):
            break
        waits = [r.a.at[r.pos] for _, r in sources if not r.done()]
        if waits:
            pause = min(waits) - (time.perf_counter() - clock[0])
            if pause > 0:
                time.sleep(min(pause, 0.001))
        idle += time.perf_counter() - turn
    seconds = time.perf_counter() - clock[0]
    for sink in ex.sinks:
        sink.finish()
    latency = LatencyHistogram()
    for sink in ex.sinks:
        latency.merge(sink.latency)
    m = ex.memory
    label = policy
    if bound is not None:
        label = f"{policy}({bound * 1e3:g} ms)"
    elif share is not None:
        label = f"{policy}({share:g})"
    return Run(
        label,
        seconds, m.trace, m.queued.peak_bytes, m.average_queue_bytes, m.queued.peak_rows,
        latency, sum(sink.written for sink in ex.sinks), ex.steps, 1 - idle / seconds,
        {sink.name: sink.latency for sink in ex.sinks}, state_peak,
    )
