"""Independent (thesis 003 §4.5): assume the filters independent and keep them sorted by
d(i|0)/t_i, i.e. by the first row of the matrix view over a_i, with the thrash guard α.

Profiling is A-Greedy's (every later filter is evaluated on a profiled dropped row) at a lower
default probability (0.005); only V's first row is kept. Exactly optimal when the filters are
independent; O(n) times worse than A-Greedy when they are not (Example 4.5.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cq_service.adaptive.filter_order.base import ProfilingOrderer

__all__ = ["Independent"]


class Independent(ProfilingOrderer):
    name = "independent"

    P = 0.005  # half A-Greedy's (the brief)

    def __init__(self, n: int, **options: Any):
        super().__init__(n, **options)
        self.first_row = np.zeros(n, dtype=np.int64)  # V[1, ·] by filter index

    def profile_positions(self, position: int) -> Sequence[int]:
        return range(position + 1, self.n)

    def add_profiles(self, known: np.ndarray, drops: np.ndarray) -> None:
        drops = drops[drops.any(axis=1)]
        _, expired = self.window.push_many(np.ones_like(drops), drops)
        self.first_row += drops.sum(axis=0)
        self.first_row -= expired.sum(axis=0)

    def check(self) -> None:
        score = self.first_row / self.costs.values()
        s = score[self.current]
        # a violation: some later filter's score beats an earlier one's by the guard
        later_best = np.maximum.accumulate(s[::-1])[::-1]
        if any(s[i] < self.alpha * later_best[i + 1] for i in range(self.n - 1)):
            self._set(sorted(self.current, key=lambda f: -score[f]))  # stable: ties keep order
