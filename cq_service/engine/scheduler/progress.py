"""Progress charts and their lower envelopes (Chain scheduling, Babcock et al., paper 000).

An operator path of m operators, operator i taking `cost[i]` per unit of input and keeping
`selectivity[i]` of it, has the chart (t₀,s₀) = (0,1), …, (t_m,s_m) with s_i = ∏_{k≤i} σ_k and
t_i − t_{i−1} = cost_i · s_{i−1}; s_m is forced to 0 (the last operator sends its output out of
the system). The lower envelope starts at (t₀,s₀) and repeatedly jumps to the *nearest* later
point of steepest descent; every operator between two envelope points forms a chain whose
priority is that segment's slope (s(x_k) − s(x_{k+1})) / (t(x_{k+1}) − t(x_k)).

Arithmetic is generic: with `fractions.Fraction` inputs the slopes are exact (the simulator's
tables), with floats they are what the engine needs.

>>> chain_priorities(ProgressChart.from_points([(0, 1), (1, 0.2), (2, 0)]))
[0.8, 0.2]
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Real

__all__ = ["ProgressChart", "chain_priorities", "greedy_priorities", "lower_envelope"]


@dataclass(frozen=True)
class ProgressChart:
    """The points (t_i, s_i), i = 0..m, of one operator path; t strictly increasing."""

    points: tuple[tuple[Real, Real], ...]

    @classmethod
    def from_operators(cls, costs: Sequence[Real], selectivities: Sequence[Real]) -> ProgressChart:
        """The chart of a path whose operator i costs `costs[i]` per input unit and keeps
        `selectivities[i]` of it (the last one's is ignored: it is 0 by definition)."""
        if len(costs) != len(selectivities) or not costs:
            raise ValueError("a path needs as many costs as selectivities, and at least one")
        t, s = costs[0] * 0, costs[0] * 0 + 1  # 0 and 1 of the inputs' number type
        points = [(t, s)]
        for k, (c, sigma) in enumerate(zip(costs, selectivities, strict=True)):
            if c <= 0:
                raise ValueError(f"operator {k} has cost {c}; costs must be positive")
            t = t + c * s
            s = s * sigma if k < len(costs) - 1 else s * 0
            points.append((t, s))
        return cls(tuple(points))

    @classmethod
    def from_points(cls, points: Sequence[tuple[Real, Real]]) -> ProgressChart:
        pts = tuple((t, s) for t, s in points)
        if len(pts) < 2 or pts[0][0] != 0:
            raise ValueError("a chart starts at t = 0 and has at least one operator")
        if any(b[0] <= a[0] for a, b in itertools.pairwise(pts)):
            raise ValueError("chart times must increase strictly")
        return cls(pts)

    @property
    def operators(self) -> int:
        return len(self.points) - 1

    def costs(self) -> list[Real]:
        """Time each operator spends on one input tuple of the path (t_i − t_{i−1})."""
        return [b[0] - a[0] for a, b in zip(self.points, self.points[1:], strict=False)]


def lower_envelope(chart: ProgressChart) -> list[int]:
    """Indices of the chart points on the lower envelope, from 0 to m."""
    pts = chart.points
    m = len(pts) - 1
    out = [0]
    k = 0
    while k < m:
        t, s = pts[k]
        best = None
        nxt = k + 1
        for j in range(k + 1, m + 1):
            d = _slope(s - pts[j][1], pts[j][0] - t)
            if best is None or d > best:  # strict: the nearest point of steepest descent
                best, nxt = d, j
        out.append(nxt)
        k = nxt
    return out


def chain_priorities(chart: ProgressChart) -> list[Real]:
    """Chain's priority of each operator: the slope of its envelope segment."""
    pts = chart.points
    env = lower_envelope(chart)
    prio: list[Real] = []
    for a, b in itertools.pairwise(env):
        slope = _slope(pts[a][1] - pts[b][1], pts[b][0] - pts[a][0])
        prio.extend([slope] * (b - a))
    return prio


def greedy_priorities(chart: ProgressChart) -> list[Real]:
    """Per-operator greedy's priority: memory freed per unit of time, (1 − σ)/c, which is the
    slope of the operator's own chart segment."""
    pts = chart.points
    return [_slope(a[1] - b[1], b[0] - a[0]) for a, b in itertools.pairwise(pts)]


def _slope(drop: Real, run: Real) -> Real:
    """drop / run, exact when both are integers (charts written with whole numbers)."""
    if isinstance(drop, int) and isinstance(run, int):
        return Fraction(drop, run)
    return drop / run
