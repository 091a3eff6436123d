"""The Profiler's state (thesis 003 §4.3.1): a sliding window of profile tuples and the running
averages a_i of the filters' times per row.

A profile tuple records, for one sampled dropped row, which filters drop it (``b_i = 1``). The
window keeps the last `size` of them (tuple-based). Variants that profile fewer filters than
A-Greedy (Sweep, LocalSwaps) leave some verdicts unknown, so each tuple also carries a `known`
mask; A-Greedy's tuples are fully known.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["FilterCosts", "ProfileWindow"]


class ProfileWindow:
    """The last `size` profile tuples of `n` filters, oldest first (a ring buffer)."""

    def __init__(self, n: int, size: int):
        if size < 1:
            raise ValueError("a profile window holds at least one tuple")
        self.n, self.size = n, size
        self._known = np.zeros((size, n), dtype=bool)
        self._drops = np.zeros((size, n), dtype=bool)
        self._next = 0  # slot of the next tuple
        self.count = 0  # tuples held

    def push(self, known: np.ndarray, drops: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Add one tuple; returns the (known, drops) of the tuple it expires, if any."""
        slot = self._next
        expired = None
        if self.count == self.size:
            expired = (self._known[slot].copy(), self._drops[slot].copy())
        else:
            self.count += 1
        self._known[slot] = known
        self._drops[slot] = drops
        self._next = (slot + 1) % self.size
        return expired

    def push_many(self, known: np.ndarray, drops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add (t, n) tuples in order; returns the (known, drops) of those they expire. A tuple
        that enters and leaves within the call is in neither (no net change)."""
        if len(drops) > self.size:
            known, drops = known[-self.size :], drops[-self.size :]
        t = len(drops)
        slots = (self._next + np.arange(t)) % self.size
        taken = slots[max(0, self.size - self.count) :]  # slots that hold a tuple
        expired = (self._known[taken].copy(), self._drops[taken].copy())
        self._known[slots] = known
        self._drops[slots] = drops
        self._next = (self._next + t) % self.size
        self.count = min(self.size, self.count + t)
        return expired

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(known, drops) of the tuples held, oldest first: two (count, n) bool arrays."""
        if self.count < self.size:
            return self._known[: self.count], self._drops[: self.count]
        order = np.r_[self._next : self.size, 0 : self._next]
        return self._known[order], self._drops[order]

    def clear(self) -> None:
        self._next = self.count = 0


class FilterCosts:
    """a_i: each filter's time per row evaluated, amortised over batches.

    Seconds and rows are summed per filter with weights decaying by `decay` per observation, so
    old conditions fade. Two sums are kept per filter: over every batch, and over the batches
    in which it ran **first** — on the whole batch, its contiguous columns, as every filter does
    when first. Only the latter put filters on equal footing. A filter run later sees the rows
    that survived, gathered, often a few dozen, and what remains of a call's fixed cost after
    the engine takes off its 1-row figure (engine/conjunction.py) then weighs on every row:
    identical hash probes measured 130 ns a row first, 160, 310 and 580 ns second to fourth,
    and an order that followed those figures followed the filters' positions, not their costs.

    So a_i is the figure from the batches a filter ran first; a filter not yet measured first
    gets the mean of those that were, or its all-batch figure where that is lower (a late
    filter's figure errs high, so a lower one is a cheap filter showing: this is how a cheap
    comparison written after an expensive match is seen to be cheaper before it has ever run
    first). With no first-position figure at all the all-batch ones are used. An evaluation
    over fewer than `min_rows` rows is not counted (too noisy). A batch's figure is held to
    `SPIKE` times the current one (a call the machine preempted). A filter never measured gets
    the mean of the measured ones (all 1.0 while none is), so the ratios the invariants compare
    are not biased by a lack of data. `unit` ignores the times (every a_i = 1, as in the
    thesis' examples)."""

    SPIKE = 2.0
    Z = 2.0  # a cost difference counts when it exceeds Z standard deviations of the noise

    def __init__(self, n: int, decay: float = 0.9, unit: bool = False, min_rows: int = 32):
        self.decay, self.unit, self.min_rows = decay, unit, min_rows
        self._seconds = np.zeros(n)  # over every batch
        self._rows = np.zeros(n)
        self._first_seconds = np.zeros(n)  # over the batches the filter ran first
        self._first_rows = np.zeros(n)
        # noise of a first-position figure: decayed mean square of log(batch figure / the
        # filter's figure), pooled over filters
        self._noise_sq, self._noise_w = 0.0, 0.0

    def observe(
        self,
        rows: Sequence[int],
        seconds: Sequence[float],
        first: int | Iterable[int] | None = None,
    ) -> None:
        """One batch: rows and seconds per filter (index); `first` ran first, on the whole
        batch (several: a batch evaluated in one pass, where every filter did; None: unknown)."""
        if self.unit:
            return
        r = np.asarray(rows, dtype=float)
        seen = r >= max(1, self.min_rows)
        t = np.asarray(seconds, dtype=float)
        # A batch's time per row is held to SPIKE times the current figure: a call that the
        # machine preempted (another process, a GC pause) must not make a filter look dearer
        # than its peers for the next dozen batches. A real rise passes in a few batches.
        firsts = () if first is None else (first,) if isinstance(first, int) else first
        for f in firsts:
            if not seen[f]:
                continue
            tf = t[f]
            if self._first_rows[f] > 0:
                current = self._first_seconds[f] / self._first_rows[f]
                tf = min(tf, self.SPIKE * current * r[f])
                if tf > 0 and current > 0:
                    dev = np.log(tf / r[f] / current)
                    self._noise_sq = self._noise_sq * self.decay + dev * dev
                    self._noise_w = self._noise_w * self.decay + 1
            self._first_seconds[f] = self._first_seconds[f] * self.decay + tf
            self._first_rows[f] = self._first_rows[f] * self.decay + r[f]
        known = seen & (self._rows > 0)
        cap = self.SPIKE * self._seconds[known] / self._rows[known] * r[known]
        t[known] = np.minimum(t[known], cap)
        self._seconds[seen] = self._seconds[seen] * self.decay + t[seen]
        self._rows[seen] = self._rows[seen] * self.decay + r[seen]

    def values(self) -> np.ndarray:
        """a_i for every filter (index), each > 0."""
        n = len(self._rows)
        seen = self._rows > 0
        if self.unit or not seen.any():
            return np.ones(n)
        a = np.full(n, np.nan)
        a[seen] = np.maximum(self._seconds[seen] / self._rows[seen], 1e-12)
        first = self._first_rows > 0
        if first.any():
            typical = self._first_seconds[first] / self._first_rows[first]
            a = np.fmin(a, typical.mean())  # not measured first: the mean, or lower
            a[first] = np.maximum(typical, 1e-12)
        a[np.isnan(a)] = a[~np.isnan(a)].mean()
        # every figure > 0: a time with the per-call cost taken off can be 0, and a mean of 0s
        # given to a filter not measured first made the invariants' ratios divide by zero
        return self._tie(np.maximum(a, 1e-12))

    def noise(self) -> float:
        """Standard deviation of log(a batch's figure / the filter's figure) at the first
        position: how far apart the same filter measures from batch to batch."""
        return float(np.sqrt(self._noise_sq / self._noise_w)) if self._noise_w else 0.0

    def _tie(self, a: np.ndarray) -> np.ndarray:
        """Filters whose figures are within `Z` × the noise of each other (in log, from the
        cheapest of a group) get the group's geometric mean: a difference the measurement
        cannot tell from noise must not decide ranks (equal-cost filters measured first at
        different moments of a loaded machine differ by 2-3x)."""
        width = self.Z * self.noise()
        if width <= 0:
            return a
        logs = np.log(a)
        out = logs.copy()
        order = np.argsort(logs, kind="stable")
        start = 0
        for k in range(1, len(order) + 1):
            if k == len(order) or logs[order[k]] - logs[order[start]] > width:
                group = order[start:k]
                out[group] = logs[group].mean()
                start = k
        return np.exp(out)
