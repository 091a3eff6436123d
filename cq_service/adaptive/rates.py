"""A source's rate as the resource manager sees it: smoothed, and re-estimated on drift.

Each observation interval (at least `interval` time units of the source's own time) gives a
sample: Δt time units and Δn elements. The estimate smooths both exponentially,
T ← α·Δt + (1 − α)·T and N ← α·Δn + (1 − α)·N, and d = T/N: a ratio of smoothed sums, not a
smoothed ratio, because Δt/Δn of a slow stream's short interval is mostly noise and its mean
is biased upwards (E[1/Δn] > 1/E[Δn]; an interval with one element instead of three says
d is three times larger). When `patience` samples in a row differ from the estimate by more
than the drift threshold, the rate has changed rather than fluctuated, and the estimate jumps
to the latest sample (brief-costmodel §2: "re-estimate when it drifts past a threshold"). The
threshold is relative (`drift`) but never inside the sample's own Poisson noise: Δn differs
from its expectation Δt/d by more than max(drift·Δt/d, `z`·√(Δt/d)). With a fixed relative
threshold a stream of a few elements per interval (2–600 tuples/min over 1 s) passes 25%
almost every time and its estimate is just its latest sample. `changed` counts the
re-estimations: the resource manager's trigger.

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
        self,
        interval: float = 1_000,
        alpha: float = 0.2,
        drift: float = 0.25,
        patience: int = 2,
        z: float = 3.0,
    ):
        self.interval = interval
        self.alpha = alpha
        self.drift = drift
        self.patience = patience
        self.z = z
        self.d = math.inf  # time units between elements (inf: none seen yet)
        self.changed = 0
        self._t: float | None = None
        self._n = 0
        self._off = 0  # samples in a row past the drift threshold
        self._time = 0.0  # smoothed Δt
        self._count = 0.0  # smoothed Δn

    def observe(self, time: float, count: int) -> None:
        """The source has produced `count` elements in all by application time `time`."""
        if self._t is None:
            self._t, self._n = time, count
            return
        dt, dn = time - self._t, count - self._n
        if dt < self.interval:
            return
        self._t, self._n = time, count
        if self._count <= 0:  # nothing seen yet: the first sample is the estimate
            self._restart(dt, dn)
            return
        expected = dt * self._count / self._time
        if abs(dn - expected) > max(self.drift * expected, self.z * math.sqrt(expected)):
            self._off += 1
            if self._off >= self.patience:
                self._off = 0
                self.changed += 1
                self._restart(dt, dn)
                return
        else:
            self._off = 0
        self._time = self.alpha * dt + (1 - self.alpha) * self._time
        self._count = self.alpha * dn + (1 - self.alpha) * self._count
        self.d = self._time / self._count

    def _restart(self, dt: float, dn: int) -> None:
        self._time, self._count = float(dt), float(dn)
        self.d = dt / dn if dn > 0 else math.inf
