"""Sample(p): keep each stream element with probability p/100, reproducibly.

Element i (0-based position in the input) is kept when u(seed, i) < p/100, where u is the
splitmix64 hash of seed·2^32 + i scaled to [0, 1) (docs/semantics.md).
"""

from __future__ import annotations

import numpy as np

from cq_service.engine.batch import Batch
from cq_service.engine.operators.base import UnaryOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["Sample", "sample_uniform"]

_M = np.uint64(0xFFFFFFFFFFFFFFFF)


def sample_uniform(seed: int, positions: np.ndarray) -> np.ndarray:
    """splitmix64(seed·2^32 + i) / 2^64 for each position i."""
    with np.errstate(over="ignore"):
        z = (np.uint64(seed) << np.uint64(32)) + positions.astype(np.uint64)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


class Sample(UnaryOperator):
    kind = "sample"

    def __init__(self, name: str, inputs: list[QueueReader], output: Queue, percent: float, seed: int):
        super().__init__(name, inputs, output)
        self.fraction = percent / 100.0
        self.seed = seed
        self._position = 0

    def describe(self) -> str:
        return f"sample {self.fraction * 100:g}%"

    def on_batch(self, batch: Batch) -> None:
        n = len(batch)
        if n == 0 or self.fraction >= 1.0:
            self._position += n
            self.emit(batch)
            return
        pos = np.arange(self._position, self._position + n, dtype=np.int64)
        self._position += n
        keep = sample_uniform(self.seed, pos) < self.fraction
        self.emit(batch.filter(keep))
