"""What a shared join's work costs, measured, and MQT's choice of the next work from it.

A call of the shared join runs one release's tuples over the partial windows of units
[lo, hi) (a contiguous range: their union is one position range, so it is one lookup). Its
seconds are modelled as `fixed + Σ_{u in [lo, hi)} per_unit[u]`, fitted by ridge least squares
over recent calls (exponentially decayed, so the fit follows drift). In this vectorised engine
the fixed part (Python and Arrow calls) dominates: a unit costs about the same whatever its
width. The paper's static priorities ∝ 1/(w_i − w_{i−1}) are the special case fixed = 0,
per_unit ∝ width.

MQT's rule is the paper's Greedy with these costs: serve the work that releases the most
results per second. For a job waiting at unit k that may run up to unit `limit`, the
candidates are its ranges [k, hi); a range's benefit is the job's tuples times the routes it
completes, its cost the fitted seconds (`best`). The best ratio over a chain's prefixes is the
first segment of Sidney's decomposition (optimal for weighted completion time on one chain).
The segment then runs as the calls that minimise its units' completion times (`first_call`):
with a large fixed cost, in one call, as LWO does; with costs that grow with width, one
partial window at a time, the narrowest first, as the paper's Greedy does.

>>> c = UnitCosts(3)
>>> for lo, hi, s in [(0, 1, 1.1), (1, 2, 1.2), (2, 3, 1.3), (0, 3, 1.6)] * 6:
...     c.observe(lo, hi, s)
>>> round(c.cost(0, 3), 2), round(c.cost(1, 2), 2)
(1.6, 1.2)
>>> c.best(0, 3, 1.0)[1], c.first_call(0, 3)  # the fixed part dominates: one call
(3, 3)
"""

from __future__ import annotations

import numpy as np

__all__ = ["UnitCosts"]

DECAY = 0.97  # weight of a call after each later call (a memory of about 30 calls)
RIDGE = 1e-3  # pulls parameters no call has told apart towards 0 (calls' weight is 1)
FLOOR = 1e-7  # seconds: no range is free


class UnitCosts:
    """Seconds per call of units [lo, hi) as `fixed + Σ per_unit`, over `n` units."""

    __slots__ = ("_a", "_b", "_fit", "calls", "n")

    def __init__(self, n: int):
        self.n = n
        self.calls = 0
        self._a = np.eye(n + 1) * RIDGE
        self._b = np.zeros(n + 1)
        self._fit: np.ndarray | None = np.zeros(n + 1)

    def observe(self, lo: int, hi: int, seconds: float) -> None:
        """A call ran units [lo, hi) in `seconds`."""
        x = np.zeros(self.n + 1)
        x[0] = 1.0
        x[1 + lo : 1 + hi] = 1.0
        self._a = DECAY * self._a + np.outer(x, x) + (1 - DECAY) * RIDGE * np.eye(self.n + 1)
        self._b = DECAY * self._b + seconds * x
        self.calls += 1
        self._fit = None

    def params(self) -> np.ndarray:
        """[fixed, per_unit[0], …] in seconds (each ≥ 0)."""
        if self._fit is None:
            self._fit = np.maximum(np.linalg.solve(self._a, self._b), 0.0)
        return self._fit

    def cost(self, lo: int, hi: int) -> float:
        """The fitted seconds of a call running units [lo, hi)."""
        p = self.params()
        return max(float(p[0] + p[1 + lo : 1 + hi].sum()), FLOOR)

    def best(self, lo: int, limit: int, tuples: float) -> tuple[float, int]:
        """For a job of `tuples` tuples waiting at unit `lo`, that may run up to unit `limit`:
        (benefit per second, hi) of its best range [lo, hi); the shortest among equals."""
        p = self.params()
        spent = float(p[0])
        best, best_hi = -1.0, lo + 1
        for hi in range(lo + 1, limit + 1):
            spent += float(p[hi])
            ratio = tuples * (hi - lo) / max(spent, FLOOR)
            if ratio > best * (1 + 1e-9):
                best, best_hi = ratio, hi
        return best, best_hi

    def first_call(self, lo: int, hi: int) -> int:
        """How far the first call goes when units [lo, hi) run next, one job's chain: the
        grouping into calls that minimises the sum of the units' completion times (each
        call pays the fixed part once; its units complete when it ends), by a DP over the
        ends of the calls."""
        best: dict[int, tuple[float, int]] = {hi: (0.0, hi)}
        for s in range(hi - 1, lo - 1, -1):
            best[s] = min(
                (self.cost(s, e) * (hi - s) + best[e][0], e) for e in range(s + 1, hi + 1)
            )
        return best[lo][1]
