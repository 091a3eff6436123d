"""Chain scheduling (Babcock, Babu, Datar, Motwani; paper 000): the engine's default.

Each leaf-to-root path gets a progress chart from the measured per-byte costs and
selectivities (cumulative selectivity scaling, s_m = 0); each operator gets the slope of its
segment of the chart's lower envelope, and an operator on several paths (a shared subplan) the
largest of its slopes. A join's statistics are over both inputs together, which is the
λ-weighted average of the brief. Within one path Chain's memory is within one unit of the best
possible schedule's at every instant when every selectivity is at most 1.

Two adaptations to an engine that shares queues and runs batches (ours, not the paper's):

- A queue read by several operators frees a byte only once every reader has read it. Its
  readers are one step of every path through them: the step costs all their costs, and the
  outputs of the other readers stay in memory for the rest of the path. They all get the
  highest of their priorities, so they move together (ties go to the oldest input).
- A run costs a fixed part plus a part per byte (engine/run_cost.py). Running an operator on
  a small batch spends the fixed part for little progress, so its priority at the moment is its
  slope times the share of the run that is per-byte work. An operator with a large fixed cost
  (a join) waits for a batch worth running while others work, instead of taking the engine's
  time in small runs.
"""

from __future__ import annotations

import time

from cq_service.engine.operators.base import Operator
from cq_service.engine.scheduler.fifo import oldest_with_stamp
from cq_service.engine.scheduler.paths import queue_readers
from cq_service.engine.scheduler.priority import PriorityPolicy
from cq_service.engine.scheduler.progress import ProgressChart, chain_priorities
from cq_service.engine.scheduler.statistics import OperatorStatistics

__all__ = ["Chain", "ChainBounded"]


class Chain(PriorityPolicy):
    name = "chain"

    def attach(self, operators: list[Operator]) -> None:
        # the readers of each shared queue, and each reader's group (one alone is not here)
        self._groups = [g for g in queue_readers(operators).values() if len(g) > 1]
        self._shared = {id(op): group for group in self._groups for op in group}
        super().attach(operators)

    def priorities(self, paths: list[list[Operator]]) -> dict[int, float]:
        out: dict[int, float] = {}
        for path in paths:
            for op, p in zip(path, chain_priorities(self.chart(path)), strict=True):
                out[id(op)] = max(out.get(id(op), p), p)
        for group in self._groups:
            top = max(out.get(id(op), 0.0) for op in group)
            for op in group:
                out[id(op)] = top
        return out

    def chart(self, path: list[Operator]) -> ProgressChart:
        """The path's progress chart in seconds and bytes per input byte."""
        stats = self.statistics
        t, s = 0.0, 1.0
        held = 0.0  # bytes written by the other readers of shared queues on the path
        points = [(t, s)]
        for k, op in enumerate(path):
            group = self._shared.get(id(op), (op,))
            step = sum(stats.cost(g) for g in group) * s
            t = t + max(step, t * 1e-12, 1e-300)  # strictly increasing, even in floats
            last = k == len(path) - 1 or self.terminal(op)
            held += s * sum(stats.selectivity(g) for g in group if g is not op)
            s = 0.0 if last else s * stats.selectivity(op)
            points.append((t, s + held))
            if last:
                break
        return ProgressChart(tuple(points))

    def now(self, op: Operator, priority: float) -> float:
        fixed = self.statistics.fixed(op)
        if fixed <= 0.0 or priority <= 0.0:
            return priority
        work = self.statistics.cost(op) * op.pending_bytes()
        return priority * work / (fixed + work)


class ChainBounded(Chain):
    """Chain, except that the oldest waiting input runs first once it has waited longer than
    `bound` seconds: Chain's memory while inputs are young, a latency bound when a burst would
    otherwise starve a low-priority chain."""

    name = "chain_bounded"

    def __init__(self, bound: float, statistics: OperatorStatistics | None = None) -> None:
        super().__init__(statistics)
        if bound < 0:
            raise ValueError("the latency bound must not be negative")
        self.bound = bound

    def highest(
        self, candidates: list[Operator], lent: dict[int, float] | None = None
    ) -> Operator | None:
        first, stamp = oldest_with_stamp(candidates, self._order)
        if first is not None and time.perf_counter() - stamp > self.bound:
            return first
        return super().highest(candidates, lent)
