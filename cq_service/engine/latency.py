"""Latency of results: a histogram with relative precision, in constant memory.

A result's latency is the wall-clock time from the moment the input that made it computable
entered the engine (its stamp, see `engine.queues`) to the moment a sink wrote it. Buckets grow
geometrically by 2%, from 1 µs to about 3 hours, so quantiles are within 2%.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["LatencyHistogram"]

_LOW = 1e-6  # seconds: everything faster falls in the first bucket
_GROWTH = 1.02
_BUCKETS = int(math.log(1e4 / _LOW) / math.log(_GROWTH)) + 2


class LatencyHistogram:
    def __init__(self) -> None:
        self.counts = np.zeros(_BUCKETS, dtype=np.int64)
        self.count = 0
        self.total = 0.0  # seconds, summed over elements
        self.max = 0.0

    def add(self, seconds: float, elements: int = 1) -> None:
        if elements <= 0:
            return
        seconds = max(seconds, 0.0)
        k = 0 if seconds <= _LOW else int(math.log(seconds / _LOW) / math.log(_GROWTH)) + 1
        self.counts[min(k, _BUCKETS - 1)] += elements
        self.count += elements
        self.total += seconds * elements
        self.max = max(self.max, seconds)

    def merge(self, other: LatencyHistogram) -> None:
        self.counts += other.counts
        self.count += other.count
        self.total += other.total
        self.max = max(self.max, other.max)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def quantile(self, q: float) -> float:
        """The q-quantile (0 ≤ q ≤ 1) in seconds: the upper edge of its bucket, at most the
        largest latency seen."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(q * self.count))
        k = int(np.searchsorted(np.cumsum(self.counts), rank))
        return min(_LOW * _GROWTH**k, self.max)
