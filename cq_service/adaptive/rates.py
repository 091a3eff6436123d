"""A source's rate as the resource manager sees it: smoothed, and re-estimated on drift.

Each observation interval (at least `interval` time units of the source's own time) gives a
sample d̂ = Δt / Δelements. The estimate follows the samples by exponential smoothing,
d ← α·d̂ + (1 − α)·d, so Poisson noise averages out; when `patience` samples in a row differ
from the estimate by more than `drift` (relative), the rate has changed rather than
fluctuated, and the estimate jumps to the latest sample (brief-costmodel §2: "re-estimate when
it drifts past a threshold"). `changed` counts those re-estimations: the resource manager's
trigger.

>>> m = RateMeter(interval=100)
>>> for t in range(0, 1001, 100):
...     m.observe(t, t // 10)   # one element every 10 units
>>> m.d
10.0
>>> for t in range(1100, 2001, 100):
...     m.observe(t, 100 + (t - 1000) // 2)   # the stream speeds up fivefold
>>> m.d, m.changed
(2.0, 1)
"""

from __future__ import annotations

import math

__all__ = ["RateMeter"]


class RateMeter:
    def __init__(
        self, interval: float = 1_000, alpha: float = 0.2, drift: float = 0.25, patience: int = 2
    ):
        self.interval = interval
        self.alpha = alpha
        self.drift = drift
        self.patience = patience
        self.d = math.inf  # time units between elements (inf: none seen yet)
        self.changed = 0
        self._t: float | None = None
        self._n = 0
        self._off = 0  # samples in a row past the drift threshold

    def observe(self, time: float, count: int) -> None:
        """The source has produced `count` elements in all by application time `time`."""
        if self._t is None:
            self._t, self._n = time, count
            return
        dt, dn = time - self._t, count - self._n
        if dt < self.interval:
            return
        self._t, self._n = time, count
        sample = dt / dn if dn > 0 else math.inf
        if math.isinf(self.d) or math.isinf(sample):
            self.d = sample
            return
        if abs(sample - self.d) > self.drift * self.d:
            self._off += 1
            if self._off >= self.patience:
                self.d, self._off = sample, 0
                self.changed += 1
                return
        else:
            self._off = 0
        self.d = self.alpha * sample + (1 - self.alpha) * self.d
