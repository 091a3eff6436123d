"""k-Mon for referential integrity RIDS(k) on a many-one join S' → S (thesis 003 §6.6).

RIDS(k) holds when every parent tuple s' ∈ S' whose child s ∈ S arrives after it is followed by
s within k arrivals on S; the join distance is the number of S arrivals after s' up to and
including s, and 0 when s came first (§6.2, Definition 6.6.1). RIDS(0): the child always comes
first.

The monitor mirrors the RIDS join of §6.6.1–6.6.2 with k_e = c·k_u (§6.6.3): a parent whose
child has not arrived waits, tagged with the count of S arrivals, until c·k_u more children have
passed without its own (so increases up to k_e are seen), or — with probability p, or while
k_u = ∞ — until it leaves its window (so larger increases are seen too). Each child arrival
records the largest join distance among the waiting parents it matches. Defaults (c, p, W) =
(1, 0.01, 500), the thesis' settings for Figure 6.11.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Hashable, Iterable

import numpy as np

from cq_service.adaptive.k_constraints.base import (
    DEFAULT_WINDOW,
    KMonitor,
    as_values,
    retention_limit,
)

__all__ = ["RIDS_C", "RIDS_P", "RIDS_W", "RidsMonitor"]

RIDS_C = 1.0
RIDS_P = 0.01
RIDS_W = 500


class RidsMonitor(KMonitor):
    """Estimates k of RIDS(k) on S' → S from the join keys of both streams, in arrival order.

    Feed each stream's keys as they arrive, interleaved as they arrive at the join::

        m = RidsMonitor()
        m.observe_parents(bids.column("auction"))   # S', the many side
        m.observe_children(auctions.column("id"))   # S, the one side
        m.k, m.increases

    ``window`` is the query window on each stream, in tuples: a child is remembered (so a later
    parent has distance 0) for ``window`` child arrivals, a sampled parent waits ``window`` parent
    arrivals.
    """

    def __init__(
        self,
        c: float = RIDS_C,
        p: float = RIDS_P,
        w: int = RIDS_W,
        window: int = DEFAULT_WINDOW,
        seed: int = 0,
    ) -> None:
        super().__init__(c, w)
        self.p, self.window = p, window
        self._rng = random.Random(seed)
        self._children = 0  # C_S: arrivals on S
        self._parents = 0  # arrivals on S'
        self._recent_children: deque[Hashable] = deque()
        self._child_keys: Counter[Hashable] = Counter()
        self._waiting: dict[Hashable, list[int]] = {}  # key -> C_S at each waiting parent
        self._n_waiting = 0
        # (C_S at arrival, parent arrival number, key), oldest first
        self._plain: deque[tuple[int, int, Hashable]] = deque()
        self._sampled: deque[tuple[int, int, Hashable]] = deque()

    @property
    def retained(self) -> int:
        """Parents waiting for their child: the monitor's state beyond the join's."""
        return self._n_waiting

    def observe_parents(self, keys: Iterable[object]) -> None:
        """Parent arrivals (S'), by join key, in arrival order."""
        for key in as_values(keys):
            self._parents += 1
            if key in self._child_keys:
                continue  # the child came first: join distance 0
            sampled = self._rng.random() < self.p
            self._waiting.setdefault(key, []).append(self._children)
            self._n_waiting += 1
            entry = (self._children, self._parents, key)
            (self._sampled if sampled else self._plain).append(entry)
            self._expire()

    def observe_children(self, keys: Iterable[object]) -> np.ndarray:
        """Child arrivals (S), by join key; returns each one's largest join distance."""
        values = as_values(keys)
        out = np.zeros(len(values), dtype=np.int64)
        for i, key in enumerate(values):
            self._children += 1
            tags = self._waiting.pop(key, None)
            distance = 0
            if tags:
                self._n_waiting -= len(tags)
                distance = self._children - min(tags)
            out[i] = distance
            self.estimate.record(distance)
            self._remember_child(key)
            self._expire()
        return out

    def _remember_child(self, key: Hashable) -> None:
        self._recent_children.append(key)
        self._child_keys[key] += 1
        if len(self._recent_children) > self.window:
            old = self._recent_children.popleft()
            self._child_keys[old] -= 1
            if not self._child_keys[old]:
                del self._child_keys[old]

    def _expire(self) -> None:
        k_e = retention_limit(self.estimate.k_u, self.c)
        plain, sampled = self._plain, self._sampled
        while plain and (
            self._children - plain[0][0] > k_e or self._parents - plain[0][1] >= self.window
        ):
            self._drop(*plain.popleft())
        while sampled and self._parents - sampled[0][1] >= self.window:
            self._drop(*sampled.popleft())

    def _drop(self, tag: int, _parent: int, key: Hashable) -> None:
        tags = self._waiting.get(key)
        if tags and tag in tags:  # else its child came and took it already
            tags.remove(tag)
            self._n_waiting -= 1
            if not tags:
                del self._waiting[key]
