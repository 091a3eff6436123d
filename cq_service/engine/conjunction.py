"""A conjunctive predicate evaluated one conjunct at a time, each on the rows that survived the
ones before it, in the order a `ConjunctOrderer` chooses (engine/filter_order.py).

Used by Select (a WHERE, HAVING, or a predicate pushed below a join or into a view) and by a
join's residual predicate. Any order keeps exactly the rows whose every conjunct is TRUE; with
fewer than two conjuncts, or one that is not `movable`, the written order is kept.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

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

__all__ = ["Conjunction"]


class Conjunction:
    """The conjuncts of `predicate`, their orderer and what they cost so far."""

    def __init__(self, predicate: BExpr, orderer: OrdererFactory | None = None):
        self.conjuncts = split_conjuncts(predicate)
        n = len(self.conjuncts)
        self._preds: list[Predicate] = [compile_predicate(c) for c in self.conjuncts]
        self._refs = [sorted(column_refs(c)) for c in self.conjuncts]
        adaptive = n > 1 and orderer is not None and all(movable(c) for c in self.conjuncts)
        self.orderer: ConjunctOrderer = orderer(n) if adaptive else StaticOrder(n)  # type: ignore[misc]
        # The written order, never profiled: the whole predicate at once is cheaper than one
        # conjunct at a time (no gathers; measured 2x on cheap comparisons).
        self._whole = compile_predicate(predicate) if type(self.orderer) is StaticOrder else None
        self.evaluated = [0] * n  # rows each conjunct was evaluated on (profiling excluded)
        self.profiled = 0  # profile tuples made

    def describe(self) -> str:
        """The current order (F1.. as written), e.g. ``a-greedy: F3, F1, F2``; '' for one."""
        if len(self.conjuncts) < 2:
            return ""
        order = ", ".join(f"F{f + 1}" for f in self.orderer.order())
        return f"{self.orderer.name}: {order}"

    def apply(self, batch: Batch) -> Batch:
        """The elements of `batch` for which every conjunct is TRUE."""
        n = len(batch)
        if not n:
            return batch
        if self._whole is not None or len(self._preds) == 1:
            self.evaluated[0] += n
            whole = self._whole if self._whole is not None else self._preds[0]
            return batch.filter(whole(batch.columns, n))
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
            seconds[f] += time.perf_counter() - start
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
        known, drops = self._profile(batch, order, profile)
        orderer.observe(rows, seconds, known, drops)
        return batch if survivors is None else batch.take(survivors)

    def _gather(self, f: int, batch: Batch, at: np.ndarray) -> list:
        """Batch columns at rows `at`, only those conjunct `f` reads (others None)."""
        pidx = pa.array(at, type=pa.int64())
        cols: list = [None] * batch.num_columns
        for c in self._refs[f]:
            cols[c] = batch.columns[c].take(pidx)
        return cols

    def _profile(
        self, batch: Batch, order: Sequence[int], profile: list[tuple[int, np.ndarray]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Profile tuples of the sampled dropped rows, in arrival order: the filters before the
        one that dropped a row passed it, that one dropped it, and the positions the orderer
        asks for are evaluated on it now."""
        k = len(order)
        total = sum(len(r) for _, r in profile)
        known = np.zeros((total, k), dtype=bool)
        drops = np.zeros((total, k), dtype=bool)
        if not total:
            return known, drops
        arrival = np.empty(total, dtype=np.int64)
        start = 0
        for pos, at in profile:
            block = slice(start, start + len(at))
            start += len(at)
            arrival[block] = at
            known[block, list(order[: pos + 1])] = True
            drops[block, order[pos]] = True
            for q in self.orderer.profile_positions(pos):
                f = order[q]
                mask = self._preds[f](self._gather(f, batch, at), len(at))
                known[block, f] = True
                drops[block, f] = ~mask
        self.profiled += total
        first = np.argsort(arrival, kind="stable")  # the profile window is in arrival order
        return known[first], drops[first]
