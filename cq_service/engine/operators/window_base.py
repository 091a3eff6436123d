"""What every window shares: the inner WHERE applied before the cutoff, then load shedding.

Shedding (`shed(p, seed)`) drops each tuple that passes the WHERE with probability p, as a
last resort when a deployment cannot fit its budget (brief-costmodel §5): a tuple's fate is
decided by `sample_uniform(seed, i)` over its 0-based position i among the tuples that reached
the shedding step, so a run is reproducible. It is kept when u ≥ p. Ticks and heartbeats are
never dropped, so time still advances downstream. With p = 0 (the default) nothing is hashed.
"""

from __future__ import annotations

import numpy as np

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch
from cq_service.engine.expressions import compile_predicate
from cq_service.engine.operators.base import UnaryOperator
from cq_service.engine.operators.sample import sample_uniform
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["WindowOperator"]


class WindowOperator(UnaryOperator):
    """Stream -> relation. Subclasses turn admitted tuples into ``+``/``−`` deltas."""

    kind = "window"
    STRUCTURE = frozenset({"_where"})

    def __init__(self, name: str, inputs: list[QueueReader], output: Queue, where: BExpr | None):
        super().__init__(name, inputs, output)
        self._where = compile_predicate(where) if where is not None else None
        self._shed_p = 0.0
        self._shed_seed = 0
        self._position = 0  # tuples that reached the shedding step so far (at any p)
        self.shed_in = 0  # tuples that reached the shedding decision while p > 0
        self.shed_dropped = 0

    @property
    def shed_fraction(self) -> float:
        """The current drop probability p (0: no shedding)."""
        return self._shed_p

    def shed(self, fraction: float, seed: int = 0) -> None:
        """Drop each arriving tuple with probability `fraction` from now on (0 stops
        shedding). Raises ValueError outside [0, 1)."""
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"{self.name}: shedding fraction {fraction} is not in [0, 1)")
        self._shed_p = float(fraction)
        self._shed_seed = seed

    def admit(self, batch: Batch) -> Batch:
        """The tuples that pass the window's inner WHERE and survive shedding (ticks are
        kept)."""
        if self._where is not None and len(batch):
            batch = batch.filter(self._where(batch.columns, len(batch)))
        n = len(batch)
        start, self._position = self._position, self._position + n
        if self._shed_p == 0.0 or n == 0:
            return batch
        u = sample_uniform(self._shed_seed, np.arange(start, start + n, dtype=np.int64))
        keep = u >= self._shed_p
        kept = int(np.count_nonzero(keep))
        self.shed_in += n
        self.shed_dropped += n - kept
        return batch.filter(keep)
