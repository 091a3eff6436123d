"""What the simulator runs: operator paths (progress charts) and tuple arrivals, in cost units.

A path's chart has integer times t_0 = 0 < t_1 < … < t_m, s_0 = 1 and s_m = 0. A tuple's
progress p is the processing it has received; one unit of processing advances it by 1, and at
p = t_m it leaves. Its size at progress p depends on the size model:

- ``step`` (the real system): s_{i−1} while t_{i−1} ≤ p < t_i, i.e. the size after the operators
  it has completed;
- ``linear`` (the paper's *lower envelope simulation*, Theorem 1): the chart's progress line,
  interpolated between points.

>>> path = Path.of(chart((0, 1), (1, "1/5"), (2, 0)))
>>> [str(s) for s in path.sizes], path.operator_at, [str(c) for c in path.chain]
(['1', '1/5', '0'], (0, 1), ['4/5', '1/5'])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from typing import Literal

from cq_service.engine.scheduler.progress import (
    ProgressChart,
    chain_priorities,
    greedy_priorities,
)

__all__ = ["SIZES", "Arrival", "Path", "SizeModel", "Workload", "chart", "exact"]

SizeModel = Literal["step", "linear"]
SIZES: tuple[SizeModel, ...] = ("step", "linear")


def exact(x: int | float | str | Fraction) -> Fraction:
    """`x` as an exact fraction; floats go through their shortest repr (0.2 → 1/5)."""
    return Fraction(str(x)) if isinstance(x, float) else Fraction(x)


def chart(
    *points: tuple[int | float | str | Fraction, int | float | str | Fraction],
) -> ProgressChart:
    """A progress chart with exact coordinates: ``chart((0, 1), (1, 0.2), (2, 0))``."""
    return ProgressChart.from_points([(exact(t), exact(s)) for t, s in points])


@dataclass(frozen=True)
class Path:
    """One operator path, compiled for unit steps: everything indexed by integer progress."""

    chart: ProgressChart
    sizes: tuple[Fraction, ...]  # size at progress p = 0..t_m (the last is 0: gone)
    operator_at: tuple[int, ...]  # operator that processes a tuple at progress p < t_m
    chain: tuple[Fraction, ...]  # Chain priority of each operator
    greedy: tuple[Fraction, ...]  # per-operator greedy priority of each operator

    @classmethod
    def of(cls, chart: ProgressChart, sizes: SizeModel = "step") -> Path:
        pts = [(exact(t), exact(s)) for t, s in chart.points]
        if any(t.denominator != 1 for t, _ in pts):
            raise ValueError(f"chart times must be integers (whole time units): {pts}")
        if pts[0][1] != 1 or pts[-1][1] != 0:
            raise ValueError("a chart starts at size 1 and ends at size 0 (s_0 = 1, s_m = 0)")
        if sizes not in SIZES:
            raise ValueError(f"unknown size model {sizes!r} (known: {', '.join(SIZES)})")
        exact_chart = ProgressChart(tuple(pts))
        size: list[Fraction] = []
        operator: list[int] = []
        for i, ((t0, s0), (t1, s1)) in enumerate(pairwise(pts)):
            for p in range(int(t0), int(t1)):
                operator.append(i)
                size.append(s0 if sizes == "step" else s0 + (s1 - s0) * (p - t0) / (t1 - t0))
        size.append(Fraction(0))
        return cls(
            chart=exact_chart,
            sizes=tuple(size),
            operator_at=tuple(operator),
            chain=tuple(chain_priorities(exact_chart)),
            greedy=tuple(greedy_priorities(exact_chart)),
        )

    @property
    def length(self) -> int:
        """t_m: the processing units one tuple needs to leave the system."""
        return len(self.operator_at)

    @property
    def operators(self) -> int:
        return self.chart.operators

    @property
    def monotone(self) -> bool:
        """Sizes never grow with progress (all selectivities ≤ 1, or a convex linear chart)."""
        return all(b <= a for a, b in pairwise(self.sizes))


@dataclass(frozen=True)
class Arrival:
    """`count` tuples enter path `path` at integer time `time`."""

    time: int
    path: int
    count: int = 1


@dataclass(frozen=True)
class Workload:
    """Paths and arrivals (sorted by time, then path)."""

    paths: tuple[Path, ...]
    arrivals: tuple[Arrival, ...]

    @classmethod
    def build(
        cls,
        charts: Sequence[ProgressChart],
        arrivals: Iterable[Arrival | tuple[int, int, int]],
        sizes: SizeModel = "step",
    ) -> Workload:
        paths = tuple(Path.of(c, sizes) for c in charts)
        arr = sorted(
            (a if isinstance(a, Arrival) else Arrival(*a) for a in arrivals),
            key=lambda a: (a.time, a.path),
        )
        for a in arr:
            if not 0 <= a.path < len(paths) or a.time < 0 or a.count < 0:
                raise ValueError(f"bad arrival {a} for {len(paths)} path(s)")
        return cls(paths, tuple(a for a in arr if a.count))

    @property
    def last_arrival(self) -> int:
        return self.arrivals[-1].time if self.arrivals else 0

    @property
    def tuples(self) -> int:
        return sum(a.count for a in self.arrivals)

    def work(self) -> int:
        """Processing units needed to drain every tuple."""
        return sum(a.count * self.paths[a.path].length for a in self.arrivals)

    def load(self) -> float:
        """Offered load: work per unit of time over the arrival span (1.0 = saturation)."""
        return self.work() / (self.last_arrival + 1)
