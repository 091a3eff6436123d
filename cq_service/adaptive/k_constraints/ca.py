"""k-Mon for clustered arrival CA(k) on attribute A of a stream (thesis 003 §6.7).

CA(k) holds when at most k tuples with another value of A arrive between any two tuples with
the same value (the clustering distance, §6.2; Definition 6.7.1). The monitor keeps the
structure CA-Aux of §6.7.2: per value v an entry C_v, the arrival number of v's first tuple plus
the number of v tuples since, so that the largest clustering distance of a new v tuple at arrival
t is t − C_v − 1 and the other-valued tuples since the first v number t − C_v.

§6.7.3: an entry is kept while at most k_e = c·k_u other-valued tuples have passed (so increases
up to k_e are seen); with probability p, or while k_u = ∞, until ``window`` have (so larger ones
are seen too). A value whose entry is gone starts afresh. Defaults (c, p, W) = (1.2, 0.01, 1000),
the thesis' settings for Figure 6.13.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Hashable, Iterable

import numpy as np

from cq_service.adaptive.k_constraints.base import (
    DEFAULT_WINDOW,
    KMonitor,
    as_values,
    retention_limit,
)

__all__ = ["CA_C", "CA_P", "CA_W", "CaMonitor"]

CA_C = 1.2
CA_P = 0.01
CA_W = 1000


class CaMonitor(KMonitor):
    """Estimates k of CA(k) on one attribute from its values in arrival order.

    ``m.observe(batch.column("car"))`` returns each arrival's largest clustering distance;
    ``m.k`` is k_u, ``m.increases`` the resets to ∞, ``m.closed(v)`` whether CA(k_u) promises
    no further tuple with value v (the test of §6.7.2's garbage collection).
    """

    def __init__(
        self,
        c: float = CA_C,
        p: float = CA_P,
        w: int = CA_W,
        window: int = DEFAULT_WINDOW,
        seed: int = 0,
    ) -> None:
        super().__init__(c, w)
        self.p, self.window = p, window
        self._rng = random.Random(seed)
        self._t = 0  # arrivals so far (the next arrival's number)
        self._aux: dict[Hashable, int] = {}  # CA-Aux: v -> C_v
        self._sampled: set[Hashable] = set()
        # Lazy min-heaps of (C_v when pushed, v): plain and sampled entries.
        self._plain_heap: list[tuple[int, Hashable]] = []
        self._sampled_heap: list[tuple[int, Hashable]] = []

    @property
    def retained(self) -> int:
        """Values with an entry in CA-Aux."""
        return len(self._aux)

    def closed(self, value: Hashable, k: float | None = None) -> bool:
        """Whether CA(k) (default k_u) promises no further tuple with ``value``.

        True once more than k other-valued tuples followed the first one with that value (as
        long as its entry is kept), False for a value with no entry.
        """
        k = self.estimate.k_u if k is None else k
        c_v = self._aux.get(value)
        return c_v is not None and self._t - 1 - c_v > k

    def observe(self, values: Iterable[object]) -> np.ndarray:
        """Arrivals by their value of A; returns each one's largest clustering distance."""
        batch = as_values(values)
        out = np.zeros(len(batch), dtype=np.int64)
        aux = self._aux
        for i, v in enumerate(batch):
            t = self._t
            c_v = aux.get(v)
            if c_v is None:
                aux[v] = t
                if self._rng.random() < self.p:
                    self._sampled.add(v)
                    heapq.heappush(self._sampled_heap, (t, v))
                else:
                    heapq.heappush(self._plain_heap, (t, v))
                distance = 0
            else:
                distance = t - c_v - 1
                aux[v] = c_v + 1
            out[i] = distance
            self.estimate.record(distance)
            self._expire(t)
            self._t = t + 1
        return out

    def _expire(self, t: int) -> None:
        k_e = retention_limit(self.estimate.k_u, self.c)
        self._expire_heap(self._plain_heap, t, min(k_e, self.window - 1), sampled=False)
        self._expire_heap(self._sampled_heap, t, self.window - 1, sampled=True)

    def _expire_heap(
        self, heap: list[tuple[int, Hashable]], t: int, limit: float, *, sampled: bool
    ) -> None:
        """Drops entries with more than ``limit`` other-valued tuples since their first."""
        aux = self._aux
        while heap and t - heap[0][0] > limit:
            pushed, v = heapq.heappop(heap)
            current = aux.get(v)
            if current is None or (v in self._sampled) != sampled or current < pushed:
                continue  # stale: the entry went, or a later entry of v lives elsewhere
            if current > pushed:
                heapq.heappush(heap, (current, v))  # v arrived since: file it again
                continue
            del aux[v]
            self._sampled.discard(v)
