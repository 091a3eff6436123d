"""What a shared join's work costs, measured, and how MQT splits a release's work from it.

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

The paper's static priorities ∝ 1/(w_i − w_{i−1}) assume fixed = 0: a unit's cost is its
scan. In this vectorised engine the fixed part is large (and each call's batch wakes every
route downstream), so splitting a release's work into one call per partial window gains
nothing unless the later windows' scan is long; and letting newer releases' cheap units
overtake an older release's long scan starves the large windows as soon as the engine is
busy (measured: their averages went to seconds while LWO's stayed at a few hundred ms). So
MQT serves the oldest release (releases waiting behind it merge into one), in the calls that
minimise the sum of completion times (`first_call`): each route of the release weighs its
tuples, the releases waiting behind it weigh their tuples times their routes until its last
call, and a split pays, besides a call's fixed part, the measured gap between a release's
calls (the executor moving the first call's results on through the routes before it comes
back: measured at about as much again as the small windows gained, Small-Large at 20×). With a large fixed part, or a backlog behind it, that is one call, as LWO; when the later
windows' scan costs more than a call's fixed part, the small windows go first, in a call of
their own, and their results go on before the scan (the paper's early release).

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
>>> c.first_call(0, 3, 1000, waiting=50_000)  # a backlog behind it: one call
3
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["UnitCosts"]

DECAY = 0.97  # weight of a call after each later call (a memory of about 30 calls)
FLOOR = 1e-7  # seconds: no range is free
GAP_DECAY = 0.8  # weight of the measured gap between a release's calls after each new one
OUTLIER = 4.0  # a call counts as at most this many times its prediction (once fitted)
WARM = 8  # calls before outliers are cut


class UnitCosts:
    """Seconds of a call of units [lo, hi) as `fixed + per_pair × pairs`, over `n` units."""

    __slots__ = ("_fit", "_found", "_paused", "_prefix", "_sums", "_tuples", "calls", "gap", "n")

    def __init__(self, n: int):
        self.n = n
        self.calls = 0
        self._sums = np.zeros(5)  # decayed: weight, Σ pairs, Σ seconds, Σ pairs², Σ pairs·seconds
        self._found = np.zeros(n)  # decayed pairs found per unit ...
        self._tuples = np.zeros(n)  # ... and the outer tuples that found them
        self._fit: tuple[float, float] | None = (0.0, 0.0)
        self._prefix: list[float] | None = None  # Σ pairs per tuple of units [0, u), cached
        self.gap = 0.0  # seconds between a release's calls (decayed mean; 0: not measured)
        self._paused: float | None = None

    def pause(self, at: float | None) -> None:
        """A call ended at `at` with its release not complete (None: complete)."""
        self._paused = at

    def resume(self, at: float) -> None:
        """A call starts at `at`: after a pause, the gap is measured (the executor moving the
        paused release's results on, and whatever else it ran meanwhile)."""
        if self._paused is not None:
            self.gap = GAP_DECAY * self.gap + (1 - GAP_DECAY) * (at - self._paused)
            self._paused = None

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
        self._prefix = None

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
        if self._prefix is None:  # (first_call asks for every range: no array work per range)
            self._prefix = [0.0, *np.cumsum(self.pairs_per_tuple()).tolist()]
        pairs = tuples * (self._prefix[hi] - self._prefix[lo])
        return float(max(fixed + per_pair * pairs, FLOOR))

    def first_call(self, lo: int, hi: int, tuples: float, waiting: float = 0.0) -> int:
        """How far the first call goes when a job of `tuples` tuples runs units [lo, hi):
        the grouping into calls that minimises the sum of completion times, each of its
        units weighing its tuples and the releases waiting behind it `waiting` (their tuples
        times their routes) until its last call ends; each call pays the fixed part once and
        its units complete when it ends, and a call that leaves units to run pays the gap
        before the next (`gap`). A DP over the ends of the calls."""
        best: dict[int, tuple[float, int]] = {hi: (0.0, hi)}
        for s in range(hi - 1, lo - 1, -1):
            weight = tuples * (hi - s) + waiting
            best[s] = min(
                ((self.cost(s, e, tuples) + (self.gap if e < hi else 0.0)) * weight + best[e][0], e)
                for e in range(s + 1, hi + 1)
            )
        return best[lo][1]
