"""A conjunctive predicate evaluated one conjunct at a time, each on the rows that survived the
ones before it, in the order a `ConjunctOrderer` chooses (engine/filter_order.py), or in one
pass when that measures cheaper (engine/pass_choice.py).

Used by Select (a WHERE, HAVING, or a predicate pushed below a join or into a view) and by a
join's residual predicate. Any order, and one pass, keep exactly the rows whose every conjunct
is TRUE; with fewer than two conjuncts, or one that is not `movable`, the written order is kept
and the predicate runs in one pass.
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

__all__ = ["OVERHEAD_EVERY", "Conjunction"]

OVERHEAD_EVERY = 512  # batches between measurements of the conjuncts' per-call times


class Conjunction:
    """The conjuncts of `predicate`, their orderer and what they cost so far."""

    def __init__(self, predicate: BExpr, orderer: OrdererFactory | None = None):
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
        self._batches = 0

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
        if self._batches % OVERHEAD_EVERY == 0:
            self._measure_overhead(batch)
        self._batches += 1
        chooser = self.chooser
        if chooser is None:
            return self._apply_ordered(batch)
        whole = chooser.whole()
        start = time.perf_counter()
        out = self._apply_one_pass(batch) if whole else self._apply_ordered(batch)
        chooser.record(whole, time.perf_counter() - start, n)
        return out

    def _apply_one_pass(self, batch: Batch) -> Batch:
        n = len(batch)
        for f in range(len(self.evaluated)):
            self.evaluated[f] += n
        self.one_pass_rows += n
        return batch.filter(self._one_pass(batch.columns, n))

    def _apply_ordered(self, batch: Batch) -> Batch:
        n = len(batch)
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
            cols = batch.columns if survivors is None else self._gather(f, batch, survivors)
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
            self._wait(batch, order, profile)
        known, drops = self._profiles_due()
        orderer.observe(rows, seconds, known, drops)
        return batch if survivors is None else batch.take(survivors)

    def _measure_overhead(self, batch: Batch) -> None:
        """Each conjunct's time on the batch's first row (best of three)."""
        first = np.zeros(1, dtype=np.int64)
        for f, pred in enumerate(self._preds):
            cols = self._gather(f, batch, first)
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                pred(cols, 1)
                best = min(best, time.perf_counter() - start)
            self.overhead[f] = best

    def _gather(self, f: int, batch: Batch, at: np.ndarray) -> list:
        """Batch columns at rows `at`, only those conjunct `f` reads (others None)."""
        return self._gather_from(f, batch.columns, at)

    def _wait(
        self, batch: Batch, order: Sequence[int], profile: list[tuple[int, np.ndarray]]
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
        cols: list = [None] * batch.num_columns
        for c in self._read:
            cols[c] = batch.columns[c].take(taken)
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


@dataclass
class _ProfileBlock:
    """Sampled dropped rows of one batch waiting to be profiled: their columns, and per row
    and filter what is known, which filter dropped it, and which filters are to be evaluated."""

    columns: list
    known: np.ndarray
    drops: np.ndarray
    need: np.ndarray
