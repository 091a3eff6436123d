"""LocalSwaps (thesis 003 §4.6): watch adjacent pairs only.

A profiled row dropped at position i is evaluated on the filter at i+1 only. The invariant is
V[i,i]/a_f(i) >= α·V[i,i+1]/a_f(i+1) for every i (two diagonals of V), counted over the profile
tuples whose verdicts at positions 0..i+1 are known; a violation swaps the pair. Cheapest to
run, but it can stay in a local optimum (Example 4.6.1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cq_service.adaptive.filter_order.base import ProfilingOrderer
from cq_service.adaptive.filter_order.matrix_view import entries

__all__ = ["LocalSwaps"]


class LocalSwaps(ProfilingOrderer):
    name = "local-swaps"

    def profile_positions(self, position: int) -> Sequence[int]:
        return (position + 1,) if position + 1 < self.n else ()

    def add_profiles(self, known: np.ndarray, drops: np.ndarray) -> None:
        self.window.push_many(known, drops)

    def check(self) -> None:
        known, drops = self.window.arrays()
        a = self.costs.values()
        order = list(self.current)
        for i in range(self.n - 1):  # one pass: each adjacent pair at most once per update
            vii, vin = entries(known, drops, order, i, i + 1)
            if vii / a[order[i]] < self.alpha * vin / a[order[i + 1]]:
                order[i], order[i + 1] = order[i + 1], order[i]
        self._set(order)
