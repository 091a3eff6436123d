"""A conjunctive predicate evaluated one conjunct at a time, each on the rows that survived the
ones before it, in the order a `ConjunctOrderer` chooses (engine/filter_order.py), or in one
pass when that measures cheaper (engine/pass_choice.py).

Used by Select (a WHERE, HAVING, or a predicate pushed below a join or into a view) and by a
join's residual predicate. An adaptive selection evaluates a batch in slices of at most
`SLICE` rows, and its order may change between them. An orderer that is a StreaMon
`ReOptimizer` (engine/streamon.py) is registered as the selection's `watch`: after a slice the
selection flags it when the orderer says its statistics changed significantly
(`significant`), and the re-optimization (`reoptimize`) runs at the executor's next poll or
before the selection's next slice, whichever comes first; one that changed the order tells
the selection so (`_order_changed`).

With an orderer that allows one pass (`whole_pass`): a one-pass slice shows the orderer every
conjunct's verdicts and time (`observe_whole`), so it keeps learning while one pass runs; a
change of order has the new order measured at once (`PassChooser.order_changed`); and in the
order, a conjunct whose skipped rows cost less than a gather of the survivors' columns runs on
the whole slice.

Any order, and one pass, keep exactly the rows whose every conjunct is TRUE; with fewer than
two conjuncts, or one that is not `movable`, the written order is kept and the predicate runs
in one pass.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cq_service.cql.bind_expr import column_refs
from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch
from cq_service.engine.expressions import Predicate, compile_predicate
from cq_service.engine.filter_order import (
    ConjunctOrderer,
    OrdererFactory,
    StaticOrder,
    movable,
    split_conjuncts,
)
from cq_service.engine.pass_choice import PassChooser
from cq_service.engine.streamon import Watch

__all__ = ["OVERHEAD_EVERY", "SLICE", "Conjunction"]

OVERHEAD_EVERY = 512  # slices between measurements of the conjuncts' per-call times
# Rows an adaptive selection evaluates at a time: a larger batch is cut into slices of this
# many rows, and the order (and the choice of one pass) may change between them, so a change
# takes effect within SLICE rows whatever the batch size (the speed of adaptivity). At 8,192
# rows a call's fixed cost is a small share of a slice's time.
SLICE = 8192


class Conjunction:
    """The conjuncts of `predicate`, their orderer and what they cost so far."""

    def __init__(self, predicate: BExpr, orderer: OrdererFactory | None = None, owner: str = ""):
        self.conjuncts = split_conjuncts(predicate)
        n = len(self.conjuncts)
        self._preds: list[Predicate] = [compile_predicate(c) for c in self.conjuncts]
        self._refs = [sorted(column_refs(c)) for c in self.conjuncts]
        self._read = sorted({c for refs in self._refs for c in refs})  # by any conjunct
        adaptive = n > 1 and orderer is not None and all(movable(c) for c in self.conjuncts)
        self.orderer: ConjunctOrderer = orderer(n) if adaptive else StaticOrder(n)  # type: ignore[misc]
        # The whole predicate in one pass: always for the written order, never profiled (no
        # gathers; measured 2x faster than one conjunct at a time on cheap comparisons); for an
        # orderer that allows it (`whole_pass`), whenever it measures cheaper than the order.
        static = type(self.orderer) is StaticOrder
        self._one_pass = self._preds[0] if n == 1 else compile_predicate(predicate)
        self.chooser: PassChooser | None = None  # None: always one pass (static) or ordered
        if not static and getattr(self.orderer, "whole_pass", False):
            self.chooser = PassChooser()
        self._always_one_pass = static
        self.evaluated = [0] * n  # rows each conjunct was evaluated on (profiling excluded)
        self.one_pass_rows = 0  # rows evaluated in one pass (every conjunct on each)
        self.profiled = 0  # profile tuples made
        # Profiled rows wait here until `profile_batch` of them are evaluated together: one
        # call per filter for many rows, not a call per filter per batch for a handful.
        self._profile_batch = max(1, int(getattr(self.orderer, "profile_batch", 1)))
        self._waiting: list[_ProfileBlock] = []
        self._waiting_rows = 0
        # Each conjunct's fixed cost per call (its time on one row), taken off the times the
        # orderer sees: what the order changes is the time per row (every conjunct is called
        # once per batch whatever the order). Measured on the first batch and every
        # `OVERHEAD_EVERY` batches after.
        self.overhead = [0.0] * n
        self._batches = 0  # slices evaluated (a batch is one slice or more)
        # The orderer as a StreaMon re-optimizer (engine/streamon.py), if it is one: the
        # executor registers it through the owning operator's `watches()`.
        self.watch: Watch | None = None
        if getattr(self.orderer, "reoptimize", None) is not None:
            self.watch = Watch(self.orderer, owner, self._order_changed)  # type: ignore[arg-type]
        # Decayed seconds per row of each conjunct on a whole slice, and per gather of
        # survivors' columns: whether a later conjunct runs on the whole slice (`_whole_slice`).
        self._rate: list[float | None] = [None] * n
        self._gather_seconds: float | None = None

    def describe(self) -> str:
        """The current order (F1.. as written), e.g. ``a-greedy: F3, F1, F2``, with
        ``(one pass)`` while one pass measures cheaper than that order; '' for one conjunct."""
        if len(self.conjuncts) < 2:
            return ""
        order = ", ".join(f"F{f + 1}" for f in self.orderer.order())
        way = " (one pass)" if self.chooser is not None and self.chooser.prefers_one_pass() else ""
        return f"{self.orderer.name}: {order}{way}"

    def apply(self, batch: Batch) -> Batch:
        """The elements of `batch` for which every conjunct is TRUE."""
        n = len(batch)
        if not n:
            return batch
        if self._always_one_pass:
            return self._apply_one_pass(batch)
        cols = list(batch.columns)
        if n <= SLICE:
            keep = self._apply_slice(cols, n)
        else:  # the order may change between slices (zero-copy views of the columns)
            parts = []
            for start in range(0, n, SLICE):
                m = min(SLICE, n - start)
                got = self._apply_slice([c.slice(start, m) for c in cols], m)
                parts.append(np.arange(start, start + m) if got is None else got + start)
            keep = np.concatenate(parts)
            if len(keep) == n:
                keep = None
        return batch if keep is None else batch.take(keep)

    def _apply_slice(self, cols: list, n: int) -> np.ndarray | None:
        """The indices of the rows of `cols` (`n` rows) that every conjunct keeps; None: all."""
        watch = self.watch
        if watch is not None and watch.flagged:  # not yet re-optimized by the executor's poll
            watch.poll()
        if self._batches % OVERHEAD_EVERY == 0:
            self._measure_overhead(cols)
        self._batches += 1
        chooser = self.chooser
        if chooser is None:
            keep = self._apply_ordered(cols, n)
        else:
            whole = chooser.whole()
            start = time.perf_counter()
            keep = self._apply_whole(cols, n) if whole else self._apply_ordered(cols, n)
            chooser.record(whole, time.perf_counter() - start, n)
        if watch is not None and self.orderer.significant():  # type: ignore[attr-defined]
            watch.flag()
        return keep

    def _order_changed(self) -> None:
        """The orderer changed its order (StreaMon re-optimized it): what the ordered way
        measured was another order's."""
        if self.chooser is not None:
            self.chooser.order_changed()

    def _apply_one_pass(self, batch: Batch) -> Batch:
        n = len(batch)
        for f in range(len(self.evaluated)):
            self.evaluated[f] += n
        self.one_pass_rows += n
        return batch.filter(self._one_pass(batch.columns, n))

    def _apply_whole(self, cols: list, n: int) -> np.ndarray | None:
        """Every conjunct on every row. An orderer with `observe_whole` is shown each one's
        verdicts and time (its profile tuples and first-position times for free); for one
        without, the predicate runs compiled as one."""
        for f in range(len(self.evaluated)):
            self.evaluated[f] += n
        self.one_pass_rows += n
        observe_whole = getattr(self.orderer, "observe_whole", None)
        if observe_whole is None:
            mask = self._one_pass(cols, n)
        else:
            k = len(self._preds)
            passes = np.empty((k, n), dtype=bool)
            seconds = [0.0] * k
            for f, pred in enumerate(self._preds):
                start = time.perf_counter()
                passes[f] = pred(cols, n)
                took = time.perf_counter() - start
                self._rate[f] = _decayed(self._rate[f], took / n)
                seconds[f] = max(0.0, took - self.overhead[f])
            mask = passes.all(axis=0)
            observe_whole(n, seconds, passes)
        return None if mask.all() else np.flatnonzero(mask)

    def _apply_ordered(self, columns: list, n: int) -> np.ndarray | None:
        orderer = self.orderer
        order = list(orderer.order())
        k = len(order)
        rows = [0] * k
        seconds = [0.0] * k
        survivors: np.ndarray | None = None  # None: every row
        profile: list[tuple[int, np.ndarray]] = []
        for pos, f in enumerate(order):
            m = n if survivors is None else len(survivors)
            if m == 0:
                break
            if survivors is None or self._whole_slice(f, n, m):
                start = time.perf_counter()
                mask = self._preds[f](columns, n)
                took = time.perf_counter() - start
                self._rate[f] = _decayed(self._rate[f], took / n)
                seconds[f] += max(0.0, took - self.overhead[f])
                rows[f] += n
                if survivors is not None:
                    mask = mask[survivors]
            else:
                start = time.perf_counter()
                cols = self._gather_from(f, columns, survivors)
                self._gather_seconds = _decayed(self._gather_seconds, time.perf_counter() - start)
                start = time.perf_counter()
                mask = self._preds[f](cols, m)
                seconds[f] += max(0.0, time.perf_counter() - start - self.overhead[f])
                rows[f] += m
            if mask.all():
                continue
            dropped = np.flatnonzero(~mask)
            picked = orderer.sample(pos, len(dropped))
            if len(picked):
                at = dropped[picked]
                profile.append((pos, at if survivors is None else survivors[at]))
            survivors = np.flatnonzero(mask) if survivors is None else survivors[mask]
        for f in range(k):
            self.evaluated[f] += rows[f]
        if profile:
            self._wait(columns, order, profile)
        known, drops = self._profiles_due()
        orderer.observe(rows, seconds, known, drops)
        return survivors

    def _whole_slice(self, f: int, n: int, m: int) -> bool:
        """Whether conjunct `f` is cheaper on the whole slice (`n` rows) than on its `m`
        survivors: when the time its skipped rows would take is below what a gather of the
        survivors' columns measures (cheap comparisons on small slices). Only for an orderer
        that allows one pass (`whole_pass`): the thesis' experiments count evaluations."""
        if self.chooser is None or self._rate[f] is None or self._gather_seconds is None:
            return False
        return self._rate[f] * (n - m) < self._gather_seconds

    def _measure_overhead(self, columns: list) -> None:
        """Each conjunct's time on the first row (best of three)."""
        first = np.zeros(1, dtype=np.int64)
        for f, pred in enumerate(self._preds):
            cols = self._gather_from(f, columns, first)
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                pred(cols, 1)
                best = min(best, time.perf_counter() - start)
            self.overhead[f] = best

    def _wait(
        self, columns: list, order: Sequence[int], profile: list[tuple[int, np.ndarray]]
    ) -> None:
        """Keep the batch's sampled dropped rows, in arrival order, with what is known of
        them: the filters before the one that dropped a row passed it, that one dropped it, and
        the filters at the positions the orderer asks for are to be evaluated on it."""
        k = len(order)
        total = sum(len(r) for _, r in profile)
        arrival = np.empty(total, dtype=np.int64)
        known = np.zeros((total, k), dtype=bool)
        drops = np.zeros((total, k), dtype=bool)
        need = np.zeros((total, k), dtype=bool)
        start = 0
        for pos, at in profile:
            block = slice(start, start + len(at))
            start += len(at)
            arrival[block] = at
            known[block, list(order[: pos + 1])] = True
            drops[block, order[pos]] = True
            later = [order[q] for q in self.orderer.profile_positions(pos)]
            need[block, later] = True
        first = np.argsort(arrival, kind="stable")  # the profile window is in arrival order
        taken = pa.array(arrival[first], type=pa.int64())
        cols: list = [None] * len(columns)
        for c in self._read:
            cols[c] = columns[c].take(taken)
        self._waiting.append(_ProfileBlock(cols, known[first], drops[first], need[first]))
        self._waiting_rows += total

    def _profiles_due(self) -> tuple[np.ndarray, np.ndarray]:
        """The waiting profile tuples, completed, once `profile_batch` rows wait: each filter
        evaluated once on all the rows that need it. Empty arrays before then."""
        k = len(self._preds)
        if self._waiting_rows < self._profile_batch:
            return np.zeros((0, k), dtype=bool), np.zeros((0, k), dtype=bool)
        blocks, self._waiting, self._waiting_rows = self._waiting, [], 0
        cols: list = list(blocks[0].columns)
        if len(blocks) > 1:
            for c in self._read:
                cols[c] = pa.concat_arrays([b.columns[c] for b in blocks])
        known = np.concatenate([b.known for b in blocks])
        drops = np.concatenate([b.drops for b in blocks])
        need = np.concatenate([b.need for b in blocks])
        for f in range(k):
            rows = np.flatnonzero(need[:, f])
            if not len(rows):
                continue
            if len(rows) == len(need):
                mask = self._preds[f](cols, len(rows))
            else:
                mask = self._preds[f](self._gather_from(f, cols, rows), len(rows))
            known[rows, f] = True
            drops[rows, f] = ~mask
        self.profiled += len(known)
        return known, drops

    def _gather_from(self, f: int, columns: list, at: np.ndarray) -> list:
        """`columns` at rows `at`, only those conjunct `f` reads (others None)."""
        pidx = pa.array(at, type=pa.int64())
        cols: list = [None] * len(columns)
        for c in self._refs[f]:
            cols[c] = columns[c].take(pidx)
        return cols


def _decayed(old: float | None, new: float, keep: float = 0.9) -> float:
    return new if old is None else old * keep + new * (1 - keep)


@dataclass
class _ProfileBlock:
    """Sampled dropped rows of one batch waiting to be profiled: their columns, and per row
    and filter what is known, which filter dropped it, and which filters are to be evaluated."""

    columns: list
    known: np.ndarray
    drops: np.ndarray
    need: np.ndarray
