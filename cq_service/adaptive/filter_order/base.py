"""What every adaptive orderer shares: the current order, drop-profiling with probability p
(seeded), the filters' times, and the engine-facing methods of `ConjunctOrderer`
(engine/filter_order.py) and of StreaMon's `Profiler` and `ReOptimizer` (engine/streamon.py):
`observe` keeps the statistics and marks a check due (`significant`), and `reoptimize` runs
the check between steps. Subclasses say which positions a profiled row is evaluated on and
what to do with each profile tuple."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from cq_service.adaptive.filter_order.profile import FilterCosts, ProfileWindow

__all__ = ["ProfilingOrderer"]

_NONE = np.empty(0, np.int64)


class ProfilingOrderer(ABC):
    """An adaptive order of `n` filters, starting from the written one."""

    name = "adaptive"
    P = 0.01  # drop-profiling probability (the brief's defaults; a variant may differ)
    WINDOW = 1000  # profile window, in profile tuples
    # Profiled rows the selection gathers (over several batches) before evaluating them
    # together (engine/conjunction.py): a filter call costs about the same for 1 row as for 64.
    PROFILE_BATCH = 64
    CHECK_EVERY = 16  # batches without new profile tuples between checks (the a_i drift)

    def __init__(
        self,
        n: int,
        *,
        p: float | None = None,
        window: int | None = None,
        alpha: float = 0.9,
        seed: int = 0,
        unit_costs: bool = False,
        start: Sequence[int] | None = None,
        profile_batch: int | None = None,
        whole_pass: bool = False,
    ):
        p = self.P if p is None else p
        if not 0 <= p <= 1:
            raise ValueError(f"drop-profiling probability must be in [0, 1], got {p}")
        if not 0 < alpha <= 1:
            raise ValueError(f"thrash guard alpha must be in (0, 1], got {alpha}")
        self.n, self.p, self.alpha = n, p, alpha
        self.current = list(range(n)) if start is None else list(start)
        if sorted(self.current) != list(range(n)):
            raise ValueError(f"not an order of {n} filters: {self.current}")
        self.costs = FilterCosts(n, unit=unit_costs)
        self.window = ProfileWindow(n, self.WINDOW if window is None else window)
        self.switches = 0  # order changes so far
        self.profile_batch = self.PROFILE_BATCH if profile_batch is None else profile_batch
        if self.profile_batch < 1:
            raise ValueError(f"profile_batch must be at least 1, got {self.profile_batch}")
        # The selection may evaluate the whole predicate in one pass when that measures
        # cheaper than this order (engine/pass_choice.py): the engine's default
        # (`orderer_factory`); off for the thesis' experiments, which count evaluations.
        self.whole_pass = whole_pass
        self._rng = np.random.default_rng(seed)
        self._unchecked = 0  # batches observed since the last check
        self._due = False  # a check is due (StreaMon: `significant`)
        self.kind = f"filter order: {self.name}"
        self.watches = f"{n} conjuncts: drops (p={self.p:g}, window {self.window.size}), a_i"

    # -- ConjunctOrderer ----------------------------------------------------------------------

    def order(self) -> Sequence[int]:
        return self.current

    def sample(self, position: int, dropped: int) -> np.ndarray:
        if dropped == 0 or self.p == 0 or not self.profiles(position):
            return _NONE
        return self._pick(dropped)

    def _pick(self, dropped: int) -> np.ndarray:
        """Each of `dropped` rows with probability p (sorted indices)."""
        k = int(self._rng.binomial(dropped, self.p))
        if k == 0:
            return _NONE
        return np.sort(self._rng.choice(dropped, size=k, replace=False))

    @abstractmethod
    def profile_positions(self, position: int) -> Sequence[int]: ...

    def profiles(self, position: int) -> bool:
        """Whether rows dropped at `position` are worth profiling now (every one is, unless a
        variant maintains no entry they count in)."""
        return True

    def observe(
        self, rows: Sequence[int], seconds: Sequence[float], known: np.ndarray, drops: np.ndarray
    ) -> None:
        self.costs.observe(rows, seconds, first=self.current[0])  # the order of this batch
        self._unchecked += 1
        if len(drops):
            self.add_profiles(np.asarray(known, dtype=bool), np.asarray(drops, dtype=bool))
        elif self._unchecked < self.CHECK_EVERY:
            return  # nothing new but the times, which drift slowly
        self._unchecked = 0
        self._due = True

    def observe_whole(self, rows: int, seconds: Sequence[float], passes: np.ndarray) -> None:
        """A batch of `rows` rows the selection evaluated in one pass (every filter on every
        row; ``passes[f, r]``: filter f keeps row r) and each filter's seconds on it. Its
        dropped rows are sampled with probability p as profile tuples whose every verdict is
        known (what profiling them would find, at no extra evaluation), and each filter's time
        counts as a first-position figure (each ran on the whole batch)."""
        self.costs.observe([rows] * self.n, seconds, first=range(self.n))
        dropped = np.flatnonzero(~passes.all(axis=0))
        picked = self._pick(len(dropped)) if len(dropped) and self.p > 0 else _NONE
        if len(picked):
            drops = ~passes[:, dropped[picked]].T
            self._unchecked = 0
            self.add_profiles(np.ones_like(drops), drops)
        else:
            self._unchecked += 1
            if self._unchecked < self.CHECK_EVERY:
                return
            self._unchecked = 0
        self._due = True

    # -- StreaMon (engine/streamon.py) ----------------------------------------------------------

    def significant(self) -> bool:
        """New profile tuples, or `CHECK_EVERY` batches of times, since the last check."""
        return self._due

    def reoptimize(self) -> bool:
        """The check `observe` made due; True if the order changed."""
        self._due = False
        before = list(self.current)
        self.check()
        return self.current != before

    def statistics(self) -> dict[str, object]:
        return {
            "order": list(self.current),
            "profile_tuples": self.window.count,
            "seconds_per_row": self.costs.values().tolist(),
            "switches": self.switches,
        }

    # -- the algorithm ------------------------------------------------------------------------

    @abstractmethod
    def add_profiles(self, known: np.ndarray, drops: np.ndarray) -> None:
        """Profile tuples ((t, n) verdicts by filter index) enter the window, oldest first;
        older ones expire. `check` then detects and corrects what they changed."""

    @abstractmethod
    def check(self) -> None:
        """Detect violations of the invariant (α-guarded) and correct them."""

    def profile(self, drops: Sequence[int], known: Sequence[int] | None = None) -> None:
        """One profile tuple then `check`: the thesis' per-update detection (its examples)."""
        d = np.asarray([drops], dtype=bool)
        k = np.ones_like(d) if known is None else np.asarray([known], dtype=bool)
        self.add_profiles(k, d)
        self.check()

    def _set(self, order: list[int]) -> None:
        if order != self.current:
            self.current = order
            self.switches += 1
