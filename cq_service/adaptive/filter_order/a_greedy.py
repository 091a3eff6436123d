"""A-Greedy (thesis 003 §4.3): keep the order satisfying the Greedy Invariant over the profile
window, V[i,i]/a_f(i) >= V[i,j]/a_f(j) for all i <= j, with the thrash guard α.

Profiler: a dropped row is profiled with probability p and evaluated on every later filter.
Re-optimizer: V is maintained incrementally (Figure 4.5) on each insert and expiry; after each
update a position i with V[i,i]/a_f(i) < α·V[i,j]/a_f(j) for some j > i is a violation
(Figure 4.6) and is corrected as in Figure 4.7: rows i..maxr are recomputed by scanning the
window and at each row the filter with the largest V[r,c]/a_f(c) (strictly larger than the
current one) is moved to position r. We move it by rotation (the filters between shift down
one place) where the figure swaps: both give an order satisfying the GI, and rotation gives
Example 4.3.3's F4, F3, F1, F2 (a swap gives F4, F1, F3, F2, tied at row 2).

Under stable statistics a GI order costs at most 4× the optimum (4/α with the guard).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cq_service.adaptive.filter_order.base import ProfilingOrderer
from cq_service.adaptive.filter_order.matrix_view import MatrixView

__all__ = ["AGreedy"]


class AGreedy(ProfilingOrderer):
    name = "a-greedy"

    def __init__(self, n: int, **options: Any):
        super().__init__(n, **options)
        self.view = MatrixView(n)

    def profile_positions(self, position: int) -> Sequence[int]:
        return range(position + 1, self.n)

    def add_profiles(self, known: np.ndarray, drops: np.ndarray) -> None:
        drops = drops[drops.any(axis=1)]  # a row no filter drops is not a profile tuple
        _, expired = self.window.push_many(np.ones_like(drops), drops)
        self.view.update_many(self.current, drops, +1)
        self.view.update_many(self.current, expired, -1)

    def violation(self) -> int | None:
        """The first position violating the GI under the guard α, if any."""
        a = self.costs.values()[self.current]
        ratio = self.view.v / a  # V[i, j] / a_f(j)
        for i in range(self.n - 1):
            best = ratio[i, i + 1 :].max()
            if ratio[i, i] < self.alpha * best:
                return i
        return None

    def check(self) -> None:
        for _ in range(self.n):  # each correction fixes a prefix; a few always suffice
            i = self.violation()
            if i is None:
                return
            self.correct(i)

    def correct(self, i: int) -> None:
        """Figure 4.7 from position `i` (rotation for the swap; see the module docstring)."""
        _, drops = self.window.arrays()
        a = self.costs.values()
        order = list(self.current)
        maxr = i
        r = i
        while r <= maxr and r < self.n:
            self.view.recompute_row(r, order, drops)
            ratio = self.view.v[r, r:] / a[order[r:]]
            maxc = r
            for c in range(r + 1, self.n):
                if ratio[c - r] > ratio[maxc - r]:
                    maxc = c
            maxr = max(maxr, maxc)
            if maxc != r:
                order.insert(r, order.pop(maxc))
                self.view.rotate(r, maxc, r + 1)
            r += 1
        self._set(order)
