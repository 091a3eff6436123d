"""What one run of an operator costs: a fixed part plus a part per byte read.

The engine processes batches, and every run pays a fixed cost (Python dispatch, Arrow calls,
queue bookkeeping) before its per-byte work. Fitting seconds = fixed + per_byte × bytes by least
squares over recent runs (exponentially decayed, so the fit follows drift) separates the two:
`per_byte` is the slope Chain's progress charts need (docs/scheduling.md says why the fixed
part does not also lower a small batch's priority).

>>> c = RunCost()
>>> for b in (100, 1_000, 10_000) * 4:
...     c.add(b, 5e-5 + 2e-8 * b)
>>> fixed, per_byte = c.fit()
>>> round(fixed * 1e6, 3), round(per_byte * 1e9, 3)
(50.0, 20.0)
"""

from __future__ import annotations

__all__ = ["RunCost"]

DECAY = 0.99  # weight of a run after each later run (a memory of about 100 runs)
MIN_RUNS = 8  # fewer runs than this: no fit yet


class RunCost:
    __slots__ = ("_b", "_bb", "_bt", "_n", "_t", "runs")

    def __init__(self) -> None:
        self.runs = 0
        self._n = self._b = self._bb = self._t = self._bt = 0.0

    def add(self, nbytes: int, seconds: float) -> None:
        d = DECAY
        self.runs += 1
        self._n = d * self._n + 1.0
        self._b = d * self._b + nbytes
        self._bb = d * self._bb + nbytes * nbytes
        self._t = d * self._t + seconds
        self._bt = d * self._bt + nbytes * seconds

    @property
    def fitted(self) -> bool:
        return self.runs >= MIN_RUNS and self._b > 0

    def fit(self) -> tuple[float, float]:
        """(fixed, per_byte); (0, 0) until enough runs have been seen."""
        if not self.fitted:
            return 0.0, 0.0
        n, b, bb, t, bt = self._n, self._b, self._bb, self._t, self._bt
        det = n * bb - b * b
        if det > 1e-9 * n * bb:  # batch sizes vary enough to tell the two parts apart
            per_byte = (n * bt - b * t) / det
            fixed = (t - per_byte * b) / n
            if per_byte <= 0:  # bigger batches were no slower: all of it is fixed
                return t / n, 0.0
            if fixed >= 0:
                return fixed, per_byte
        return 0.0, t / b  # one batch size, or a negative intercept: all of it per byte
