"""Chain scheduling (Babcock, Babu, Datar, Motwani; paper 000): the engine's default.

Each leaf-to-root path gets a progress chart from the measured per-byte costs and
selectivities (cumulative selectivity scaling, s_m = 0); each operator gets the slope of its
segment of the chart's lower envelope, and an operator on several paths (a shared subplan) the
largest of its slopes. A join's statistics are over both inputs together, which is the
λ-weighted average of the brief. Within one path Chain's memory is within one unit of the best
possible schedule's at every instant when every selectivity is at most 1.
"""

from __future__ import annotations

import time

from cq_service.engine.operators.base import Operator
from cq_service.engine.scheduler.fifo import oldest_with_stamp
from cq_service.engine.scheduler.priority import PriorityPolicy
from cq_service.engine.scheduler.progress import ProgressChart, chain_priorities
from cq_service.engine.scheduler.statistics import OperatorStatistics

__all__ = ["Chain", "ChainBounded"]


class Chain(PriorityPolicy):
    name = "chain"

    def priorities(self, paths: list[list[Operator]]) -> dict[int, float]:
        out: dict[int, float] = {}
        for path in paths:
            for op, p in zip(path, chain_priorities(self.chart(path)), strict=True):
                out[id(op)] = max(out.get(id(op), p), p)
        return out

    def chart(self, path: list[Operator]) -> ProgressChart:
        """The path's progress chart in seconds and bytes per input byte."""
        t, s = 0.0, 1.0
        points = [(t, s)]
        for k, op in enumerate(path):
            step = self.statistics.cost(op) * s
            t = t + max(step, t * 1e-12, 1e-300)  # strictly increasing, even in floats
            last = k == len(path) - 1 or self.terminal(op)
            s = 0.0 if last else s * self.statistics.selectivity(op)
            points.append((t, s))
            if last:
                break
        return ProgressChart(tuple(points))


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
