"""k-Mon for ordered arrival OA(k) on attribute A of a stream (thesis 003 §6.8).

OA(k) holds when a tuple s2 with a smaller A than an earlier s1 arrives at most k tuples after it
(the scrambling distance: arrivals after s1 up to and including s2, §6.2; Definition 6.8.1). On
a parent's join attribute it is OAP(k), on a child's OAC(k) (§6.8.1, §6.8.5): the monitor is
the same.

§6.8.3: keep the running maximum of A after each of the last k_e + 1 arrivals, max_1 the most
recent (k_e = c·k_u; while k_u = ∞, up to ``cap`` of them). A new tuple with A ≥ max_1 has
distance 0; otherwise a binary search finds i with max_{i+1} ≤ A < max_i and the distance is i;
below every kept maximum it is at least the window's length, and recorded as that (still
above k_u, so an increase is seen). OA(k)
promises no later tuple below max_{k+1} (`floor`). Defaults (c, W) = (1.2, 1000), the thesis'
settings for Figure 6.15; OA samples nothing, so it has no p.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from cq_service.adaptive.k_constraints.base import (
    DEFAULT_WINDOW,
    KMonitor,
    as_values,
    retention_limit,
)

__all__ = ["OA_C", "OA_W", "OaMonitor"]

OA_C = 1.2
OA_W = 1000


class OaMonitor(KMonitor):
    """Estimates k of OA(k) on one attribute from its (comparable) values in arrival order.

    ``m.observe(batch.column("ts"))`` returns each arrival's largest scrambling distance;
    ``m.k`` is k_u, ``m.increases`` the resets to ∞, ``m.floor()`` the value below which OA(k_u)
    promises no later tuple.
    """

    def __init__(self, c: float = OA_C, w: int = OA_W, cap: int = DEFAULT_WINDOW) -> None:
        super().__init__(c, w)
        self.cap = cap
        self._maxima: list[Any] = []  # running maxima, oldest first; live from _head on
        self._head = 0

    @property
    def retained(self) -> int:
        """Maxima kept in the window."""
        return len(self._maxima) - self._head

    def floor(self, k: float | None = None) -> Any:
        """max_{k+1} (k defaults to k_u): OA(k) promises no later value below it; None if unknown."""
        k = self.estimate.k_u if k is None else k
        if math.isinf(k) or k + 1 > self.retained:
            return None
        return self._maxima[len(self._maxima) - int(k) - 1]

    def observe(self, values: Iterable[object]) -> np.ndarray:
        """Arrivals by their value of A; returns each one's largest scrambling distance."""
        batch = as_values(values)
        out = np.zeros(len(batch), dtype=np.int64)
        maxima = self._maxima
        for i, a in enumerate(batch):
            distance = 0
            if len(maxima) > self._head:
                newest = maxima[-1]
                if a < newest:
                    j = bisect.bisect_right(maxima, a, lo=self._head)
                    distance = len(maxima) - j  # all kept maxima above a: at least this
                maxima.append(newest if newest >= a else a)
            else:
                maxima.append(a)
            out[i] = distance
            self.estimate.record(distance)
            self._trim()
        return out

    def _trim(self) -> None:
        k_e = retention_limit(self.estimate.k_u, self.c)
        keep = self.cap if math.isinf(k_e) else min(self.cap, math.ceil(k_e) + 1)
        self._head = max(self._head, len(self._maxima) - keep)
        if self._head > 1024 and self._head * 2 > len(self._maxima):
            del self._maxima[: self._head]
            self._head = 0
