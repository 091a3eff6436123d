"""The adherence estimate every k-Mon monitor shares (thesis 003 §6.6.3, §6.7.3, §6.8.3).

A monitor measures one distance per arrival on the stream it watches (a join distance for RIDS,
a clustering distance for CA, a scrambling distance for OA) and hands it to `AdherenceEstimate`:

- k_u starts at ∞;
- once the last W arrivals since the last reset are all seen, k_u drops to the largest distance
  among them whenever that is below k_u (decrease detection);
- a distance above k_u is an increase: k_u becomes ∞ at once and the count of increases grows;
  decrease detection sets it again after W more arrivals.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable

import numpy as np

__all__ = ["INFINITE", "AdherenceEstimate", "KMonitor", "as_values", "retention_limit"]

INFINITE = math.inf

# The query window of the thesis' experiments, `[Rows 50,000]` (§6.5): how long a sampled tuple
# is kept when the monitor is not told the window, and the cap on OA's window of maxima.
DEFAULT_WINDOW = 50_000


def as_values(values: Iterable[object]) -> list[object]:
    """A batch column (numpy array, Arrow array, list) as a list of Python values."""
    to_pylist = getattr(values, "to_pylist", None)
    if to_pylist is not None:
        return list(to_pylist())
    if isinstance(values, np.ndarray):
        return values.tolist()
    return list(values)


def retention_limit(k_u: float, c: float) -> float:
    """k_e = c·k_u, the largest increase a monitor is guaranteed to notice (∞ while k_u is)."""
    return INFINITE if math.isinf(k_u) else c * k_u


class AdherenceEstimate:
    """k_u from the distances of the last W arrivals; see the module docstring."""

    __slots__ = ("_maxima", "_seen", "increases", "k_u", "on_increase", "w")

    def __init__(self, w: int) -> None:
        if w < 1:
            raise ValueError(f"W must be at least 1, got {w}")
        self.w = w
        self.k_u: float = INFINITE
        self.increases = 0
        # told (old k_u, the distance that exceeded it) at each increase, before the reset
        self.on_increase: Callable[[float, int], None] | None = None
        self._seen = 0  # arrivals since the start or the last increase
        self._maxima: deque[tuple[int, int]] = deque()  # (arrival, distance), distances falling

    def record(self, distance: int) -> None:
        """One arrival with the largest distance it showed (0 when it showed none)."""
        if distance > self.k_u:
            if self.on_increase is not None:
                self.on_increase(self.k_u, distance)
            self.k_u = INFINITE
            self.increases += 1
            self._seen = 0
            self._maxima.clear()
        n = self._seen
        self._seen = n + 1
        maxima = self._maxima
        while maxima and maxima[-1][1] <= distance:
            maxima.pop()
        maxima.append((n, distance))
        if maxima[0][0] <= n - self.w:
            maxima.popleft()
        if self._seen >= self.w and maxima[0][1] < self.k_u:
            self.k_u = maxima[0][1]

    @property
    def k(self) -> float:
        """The adherence in use: an int, or ∞ (`math.inf`) while unknown."""
        return self.k_u


class KMonitor:
    """What every monitor shares: c (tuples are retained to c·k_u) and the estimate of k from
    the last W arrivals, shown as the adherence in use and its resets."""

    def __init__(self, c: float, w: int) -> None:
        if c < 1:
            raise ValueError(f"c must be at least 1, got {c}")
        self.c = c
        self.estimate = AdherenceEstimate(w)

    @property
    def k(self) -> float:
        """k_u: the adherence the join may use, or ∞."""
        return self.estimate.k

    @property
    def increases(self) -> int:
        """How many times k_u was reset to ∞ by an observed increase."""
        return self.estimate.increases
