"""Test doubles of the engine's conjunct orderer (cq_service/engine/filter_order.py,
`ConjunctOrderer`), shared by the unit and property tests of filter ordering."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["Switching"]


class Switching:
    """A new random order at every batch; every dropped row profiled on every later filter.
    `seen` counts the profile tuples it was given."""

    name = "switching"

    def __init__(self, n: int, seed: int = 0):
        self.n = n
        self._rng = np.random.default_rng(seed)
        self.seen = 0

    def order(self) -> Sequence[int]:
        return self._rng.permutation(self.n).tolist()

    def sample(self, position: int, dropped: int) -> np.ndarray:
        return np.arange(dropped)

    def profile_positions(self, position: int) -> Sequence[int]:
        return range(position + 1, self.n)

    def observe(
        self, rows: Sequence[int], seconds: Sequence[float], known: np.ndarray, drops: np.ndarray
    ) -> None:
        assert known.shape == drops.shape and known.shape[1] == self.n
        self.seen += len(drops)
