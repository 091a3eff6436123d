"""Chain scheduling (Babcock, Babu, Datar, Motwani; paper 000): the engine's default.

Each leaf-to-root path gets a progress chart from the measured per-byte costs and
selectivities (cumulative selectivity scaling, s_m = 0); each operator gets the slope of its
segment of the chart's lower envelope, and an operator on several paths (a shared subplan) the
largest of its slopes, counting a stored relation's paths only for operators no stream's path
reaches. (A relation rarely changes, λ ≈ 0 in the brief's weighting; its path starts at the
join, and its chart would otherwise lift a stream's whole slow tail to the join's slope.) A join's statistics are over both inputs together, which is the
λ-weighted average of the brief. Within one path Chain's memory is within one unit of the best
possible schedule's at every instant when every selectivity is at most 1.

A queue read by several operators (ours: the paper charts paths, which share nothing)
frees a byte only once every reader has read it, so no reader's own path says what reading it
is worth. Below such a queue the plan is a tree: one step, every reader reading, costs all
their costs and turns each byte into the readers' outputs together; after it the branches are
independent chains. Run in the best order, which is their envelope segments by falling slope,
they form one convex chart, and the envelope of the step followed by that chart gives the
step's slope. Every reader gets it, so the readers move together (ties go to the oldest input:
the reader that lags reads first). A branch operator in the step's first envelope segment gets
at least the step's slope, so that what the step writes moves on as in a single path (its own
path's chart may have merged it into a flatter segment with the operators before the queue).
A reader whose output is shared again continues along its first path only.
"""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction

from cq_service.engine.operators.base import Operator
from cq_service.engine.operators.source import SourceOperator
from cq_service.engine.scheduler.fifo import oldest_with_stamp
from cq_service.engine.scheduler.priority import PriorityPolicy
from cq_service.engine.scheduler.progress import ProgressChart, chain_priorities
from cq_service.engine.scheduler.statistics import OperatorStatistics

__all__ = ["Chain", "ChainBounded", "ChainShare"]


class Chain(PriorityPolicy):
    name = "chain"

    def attach(self, operators: list[Operator]) -> None:
        sources = [op for op in operators if isinstance(op, SourceOperator)]
        self._relations = {id(op.output) for op in sources if op.is_relation}
        self._streams = {id(op.output) for op in sources if not op.is_relation}
        super().attach(operators)

    def priorities(self, paths: list[list[Operator]]) -> dict[int, float]:
        out: dict[int, float] = {}
        on_streams: set[int] = set()  # operators on some stream's path
        origins = [(self._from_relation(path), path) for path in paths]
        for relation, path in sorted(origins, key=lambda o: o[0]):  # streams' paths first
            for op, p in zip(path, chain_priorities(self.chart(path)), strict=True):
                if relation and id(op) in on_streams:
                    continue
                if not relation:
                    on_streams.add(id(op))
                out[id(op)] = max(out.get(id(op), p), p)
        for group in self.shared:
            self._share(group, paths, out)
        return out

    def _from_relation(self, path: list[Operator]) -> bool:
        """The path starts at a stored relation's source: its first operator reads one (and
        reads no stream's source, whose path it would then start too)."""
        queues = {id(r.queue) for r in path[0].inputs}
        return bool(queues & self._relations) and not queues & self._streams

    def chart(self, path: list[Operator], start: float = 1.0) -> ProgressChart:
        """The path's progress chart in seconds and bytes per input byte, for `start` bytes
        at its first operator's input."""
        stats = self.statistics
        t, s = 0.0, start
        points = [(t, s)]
        for k, op in enumerate(path):
            t = t + max(stats.cost(op) * s, t * 1e-12, 1e-300)  # strictly increasing
            last = k == len(path) - 1 or self.terminal(op)
            s = 0.0 if last else s * stats.selectivity(op)
            points.append((t, s))
        return ProgressChart(tuple(points))

    def _share(self, group: list[Operator], paths: list[list[Operator]],
               out: dict[int, float]) -> None:
        """Give a shared queue's readers the slope of reading it (module docstring)."""
        stats = self.statistics
        cost = written = 0.0
        pieces: list[tuple[float, float, float, Operator]] = []  # (slope, Δt, Δs, operator)
        for reader in group:
            cost += stats.cost(reader)
            path = next((p for p in paths if reader in p), None)
            rest = [] if path is None else path[path.index(reader) + 1:]
            if not rest or self.terminal(reader):
                continue
            sigma = stats.selectivity(reader)
            written += sigma
            chart = self.chart(rest, start=sigma)
            steps = itertools.pairwise(chart.points)
            for op, slope, (a, b) in zip(rest, chain_priorities(chart), steps, strict=True):
                pieces.append((slope, b[0] - a[0], b[1] - a[1], op))
        pieces.sort(key=lambda piece: -piece[0])  # stable: a branch keeps its order
        t, s = max(cost, 1e-300), written
        points = [(0.0, 1.0), (t, s)]
        for _, dt, ds, _ in pieces:
            # a piece measured at no cost still moves time on, or its slope would be 0/0
            t, s = max(t + dt, math.nextafter(t, math.inf)), s + ds
            points.append((t, max(s, 0.0)))
        slopes = chain_priorities(ProgressChart(tuple(points)))
        top = slopes[0]
        for reader in group:
            out[id(reader)] = top
        for (_, _, _, op), slope in zip(pieces, slopes[1:], strict=True):
            if slope == top:  # in the step's first segment
                out[id(op)] = max(out.get(id(op), top), top)


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


class ChainShare(Chain):
    """Chain, except that a share `share` of the steps goes to the oldest waiting input (a
    FIFO step): step n is a FIFO step exactly when ⌊n·share⌋ > ⌊(n−1)·share⌋, so share 1/k
    is every k-th step. Share 0 is Chain's order, share 1 FIFO's. Unlike a bound on waiting
    time, which a burst's backlog exceeds at once (every step then FIFO's), a share keeps
    Chain's order for the other steps however old the backlog, so memory and tail latency
    move between Chain's and FIFO's as the share grows. Only steps with a ready operator
    count; the share is kept as a fraction (denominator at most 1000) so the order is exact."""

    name = "chain_share"

    def __init__(self, share: float, statistics: OperatorStatistics | None = None) -> None:
        super().__init__(statistics)
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"the share of FIFO steps must be in [0, 1], not {share}")
        self.share = share
        self._fraction = Fraction(share).limit_denominator(1000)
        self._steps = 0

    def attach(self, operators: list[Operator]) -> None:
        super().attach(operators)
        self._steps = 0

    def highest(
        self, candidates: list[Operator], lent: dict[int, float] | None = None
    ) -> Operator | None:
        if not candidates:
            return None
        self._steps += 1
        n, f = self._steps, self._fraction
        if (n * f.numerator) // f.denominator > ((n - 1) * f.numerator) // f.denominator:
            return oldest_with_stamp(candidates, self._order)[0]
        return super().highest(candidates, lent)
