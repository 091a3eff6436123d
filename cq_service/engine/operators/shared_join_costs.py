"""What a shared join's work costs, measured, and MQT's choice of the next work from it.

A call of the shared join runs one release's tuples over the partial windows of units
[lo, hi) (a contiguous range: their union is one position range, so it is one lookup) and
sends its results on as one batch. Its seconds are modelled as `fixed + per_pair × pairs`:
`fixed` is what any call costs (Python and Arrow calls, and the batch the routes then read),
`per_pair` the vectorised work per pair found. Both are fitted by least squares over recent
calls (exponentially decayed, so the fit follows drift; a call far slower than predicted,
the process pre-empted, counts as at most `OUTLIER` times the prediction). The pairs a call
will find are predicted from the units' measured pairs per outer tuple: a call over units
[lo, hi) for m tuples finds about m × Σ_{u in [lo, hi)} pairs_per_tuple[u] (the partial
windows' sizes, as the data fills them: with equal rates, ∝ w_u − w_{u−1}).

The paper's static priorities ∝ 1/(w_i − w_{i−1}) are the special case fixed = 0. In this
vectorised engine the fixed part is large: splitting a release's work into one call per
partial window costs a fixed part per call and gains nothing unless the later windows' scan
is long. So MQT's rule is the paper's Greedy with these costs: serve the work that releases
the most results per second. For a job waiting at unit k that may run up to unit `limit`,
the candidates are its ranges [k, hi); a range's benefit is the job's tuples times the routes
it completes, its cost the predicted seconds (`best`). The best ratio over a chain's prefixes
is the first segment of Sidney's decomposition (optimal for weighted completion time on one
chain). The segment then runs as the calls that minimise its units' completion times
(`first_call`): with a large fixed cost, in one call, as LWO does; when the later windows'
scan costs more than a call's fixed part, the small windows first, as the paper's Greedy does.

>>> c = UnitCosts(3)
>>> for _ in range(10):  # 1 ms a call, 1 µs a pair; 0.1, 1 and 10 pairs per tuple
...     c.observe(0, 1, 1e-3 + 1e-6 * 1, 1, 10, [1, 0, 0])
...     c.observe(1, 3, 1e-3 + 1e-6 * 110, 110, 10, [0, 10, 100])
>>> [round(x * 1e6) for x in c.params()]  # fixed, per pair (µs)
[1000, 1]
>>> round(c.cost(0, 3, 10) * 1e3, 3)  # ms for 10 tuples over every unit
1.111
>>> c.first_call(0, 3, 10), c.first_call(0, 3, 1000)  # 10 tuples: one call; 1,000: split
(3, 2)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["UnitCosts"]

DECAY = 0.97  # weight of a call after each later call (a memory of about 30 calls)
FLOOR = 1e-7  # seconds: no range is free
OUTLIER = 4.0  # a call counts as at most this many times its prediction (once fitted)
WARM = 8  # calls before outliers are cut


class UnitCosts:
    """Seconds of a call of units [lo, hi) as `fixed + per_pair × pairs`, over `n` units."""

    __slots__ = ("_fit", "_found", "_sums", "_tuples", "calls", "n")

    def __init__(self, n: int):
        self.n = n
        self.calls = 0
        self._sums = np.zeros(5)  # decayed: weight, Σ pairs, Σ seconds, Σ pairs², Σ pairs·seconds
        self._found = np.zeros(n)  # decayed pairs found per unit ...
        self._tuples = np.zeros(n)  # ... and the outer tuples that found them
        self._fit: tuple[float, float] | None = (0.0, 0.0)

    def observe(
        self,
        lo: int,
        hi: int,
        seconds: float,
        pairs: int,
        tuples: int = 0,
        found: Sequence[int] | None = None,
    ) -> None:
        """A call ran units [lo, hi) in `seconds`, finding `pairs` pairs in all; with `tuples`
        outer tuples, `found[u]` of them in unit u's partial window (`found` has n entries)."""
        if self.calls >= WARM:
            fixed, per_pair = self.params()
            seconds = min(seconds, OUTLIER * (fixed + per_pair * pairs) + FLOOR)
        x, y = float(pairs), float(seconds)
        self._sums = DECAY * self._sums + np.array([1.0, x, y, x * x, x * y])
        if tuples and found is not None:
            self._found[lo:hi] = DECAY * self._found[lo:hi] + np.asarray(found, float)[lo:hi]
            self._tuples[lo:hi] = DECAY * self._tuples[lo:hi] + tuples
        self.calls += 1
        self._fit = None

    def params(self) -> tuple[float, float]:
        """(fixed seconds per call, seconds per pair), each ≥ 0."""
        if self._fit is None:
            w, sx, sy, sxx, sxy = self._sums
            det = w * sxx - sx * sx
            per_pair = (w * sxy - sx * sy) / det if det > 1e-12 * max(w * sxx, 1.0) else 0.0
            if per_pair <= 0:
                fixed, per_pair = sy / w, 0.0
            else:
                fixed = (sy - per_pair * sx) / w
                if fixed < 0:
                    fixed, per_pair = 0.0, sxy / sxx
            self._fit = (max(fixed, 0.0), per_pair)
        return self._fit

    def pairs_per_tuple(self) -> np.ndarray:
        """The pairs an outer tuple finds in each unit's partial window (0: not measured)."""
        return np.divide(self._found, self._tuples, out=np.zeros(self.n), where=self._tuples > 0)

    def cost(self, lo: int, hi: int, tuples: float) -> float:
        """The predicted seconds of a call running units [lo, hi) for `tuples` outer tuples."""
        fixed, per_pair = self.params()
        pairs = tuples * float(self.pairs_per_tuple()[lo:hi].sum())
        return float(max(fixed + per_pair * pairs, FLOOR))

    def best(self, lo: int, limit: int, tuples: float) -> tuple[float, int]:
        """For a job of `tuples` tuples waiting at unit `lo`, that may run up to unit `limit`:
        (benefit per second, hi) of its best range [lo, hi); the shortest among equals."""
        best, best_hi = -1.0, lo + 1
        for hi in range(lo + 1, limit + 1):
            ratio = tuples * (hi - lo) / self.cost(lo, hi, tuples)
            if ratio > best * (1 + 1e-9):
                best, best_hi = ratio, hi
        return best, best_hi

    def first_call(self, lo: int, hi: int, tuples: float) -> int:
        """How far the first call goes when units [lo, hi) run next, one job's chain: the
        grouping into calls that minimises the sum of the units' completion times (each
        call pays the fixed part once; its units complete when it ends), by a DP over the
        ends of the calls."""
        best: dict[int, tuple[float, int]] = {hi: (0.0, hi)}
        for s in range(hi - 1, lo - 1, -1):
            best[s] = min(
                (self.cost(s, e, tuples) * (hi - s) + best[e][0], e) for e in range(s + 1, hi + 1)
            )
        return best[lo][1]
