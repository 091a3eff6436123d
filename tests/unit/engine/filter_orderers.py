"""Test doubles of the engine's conjunct orderer (cq_service/engine/filter_order.py,
`ConjunctOrderer`), shared by the unit and property tests of filter ordering."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cq_service.engine.pass_choice import PassChooser

__all__ = ["Alternating", "Switching"]


class Switching:
    """A new random order at every batch; every dropped row profiled on every later filter.
    `seen` counts the profile tuples it was given. With `whole_pass`, the selection may run
    batches in one pass (engine/pass_choice.py)."""

    name = "switching"

    def __init__(self, n: int, seed: int = 0, whole_pass: bool = False):
        self.n = n
        self._rng = np.random.default_rng(seed)
        self.seen = 0
        self.whole_pass = whole_pass

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


class Alternating(PassChooser):
    """One pass at every third batch, whatever the times: the way changes often."""

    def whole(self) -> bool:
        return self._batches % 3 == 2
