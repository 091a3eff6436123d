"""Sweep (thesis 003 §4.4): profile one position j at a time, in stages.

In a stage only the filter at position j is profiled: a profiled row dropped at a position
before j is evaluated on that one filter (at most one extra evaluation per profiled row). The
stage maintains the Sweep Invariant V[i,i]/a_f(i) >= α·V[i,j]/a_f(j) for i < j, counting only
profile tuples whose verdicts at positions 0..i and j are known; a violation moves the filter at
j to the first violating position i and ends the stage. A stage also ends after `stage` profile
tuples without a violation (the thesis leaves the length open; ours defaults to a fifth of the
window). j then moves to the next position, cycling over 1..n-1. Converges to a GI order under
stable statistics; the slowest of the four to adapt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cq_service.adaptive.filter_order.base import ProfilingOrderer
from cq_service.adaptive.filter_order.matrix_view import entries

__all__ = ["Sweep"]


class Sweep(ProfilingOrderer):
    name = "sweep"

    WINDOW = 500  # the brief's Sweep window

    def __init__(self, n: int, *, stage: int | None = None, **options: Any):
        super().__init__(n, **options)
        self.stage = stage if stage is not None else max(1, self.window.size // 5)
        self.j = 1  # the profiled position
        self._in_stage = 0

    def profiles(self, position: int) -> bool:
        return position <= self.j  # later drops count in no entry the stage keeps

    def profile_positions(self, position: int) -> Sequence[int]:
        return (self.j,) if position < self.j else ()

    def add_profiles(self, known: np.ndarray, drops: np.ndarray) -> None:
        self.window.push_many(known, drops)
        self._in_stage += len(drops)

    def check(self) -> None:
        """Correct a violation at the profiled position (ending the stage), else end the stage
        once it has its profile tuples."""
        known, drops = self.window.arrays()
        a = self.costs.values()
        f, j = self.current, self.j
        for i in range(j):
            vii, vij = entries(known, drops, f, i, j)
            if vii / a[f[i]] < self.alpha * vij / a[f[j]]:
                order = list(f)
                order.insert(i, order.pop(j))
                self._set(order)
                self._next_stage()
                return
        if self._in_stage >= self.stage:
            self._next_stage()

    def _next_stage(self) -> None:
        self.j = self.j + 1 if self.j + 1 < self.n else 1
        self._in_stage = 0
