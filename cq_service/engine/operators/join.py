"""Symmetric hash join of two relations on equi-keys, with a residual predicate.

Relations arrive as deltas. The join of two delta streams is bilinear: every pair of elements
(l, r) contributes weight w_l·w_r at instant max(τ_l, τ_r). So for the deltas ΔL, ΔR that arrive
up to a common heartbeat, with L0, R0 the multisets seen before them, the output is

    ΔL ⋈ R0 (at τ_l)  +  L0 ⋈ ΔR (at τ_r)  +  ΔL ⋈ ΔR (at max(τ_l, τ_r))

and then L0 += ΔL, R0 += ΔR. Each side's synopsis is its current multiset (rows with net
weights); NULL keys never match. ΔL ⋈ R0 and L0 ⋈ ΔR look the delta's keys up in the other
side's synopsis, which reads only the matching rows (`JoinSide`, join_synopsis.py: runs of rows
with sorted key and row-hash indexes); ΔL ⋈ ΔR is one vectorised hash join (Arrow's).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch, merge_ticks
from cq_service.engine.conjunction import Conjunction
from cq_service.engine.constraint_status import ConstraintStatus
from cq_service.engine.expressions import compile_expr
from cq_service.engine.filter_order import OrdererFactory
from cq_service.engine.join_constraints import AdherenceFactory, JoinConstraint, adherence_for
from cq_service.engine.operators.base import MultiInputOperator
from cq_service.engine.operators.join_reduction import RidsReduction
from cq_service.engine.operators.join_synopsis import JoinSide, Run, match_keys
from cq_service.engine.queues import Queue, QueueReader
from cq_service.engine.streamon import Watch

__all__ = ["Join", "key_columns", "key_tuples", "take_columns"]

# The synopsis classes lived in this module before join_synopsis.py; snapshots pickled then
# name them here.
_Side, _Run = JoinSide, Run


def key_tuples(evaluators: list, batch: Batch) -> list[tuple | None]:
    """Each element's key as a tuple (None when any key part is NULL)."""
    n = len(batch)
    if not evaluators:
        return [()] * n
    parts = [ev(batch.columns, n).to_pylist() for ev in evaluators]
    return [None if None in k else k for k in zip(*parts)]


def key_columns(evaluators: list, batch: Batch) -> list[pa.Array]:
    """Each element's join key as columns; with no key (a cross product) one shared key."""
    n = len(batch)
    if not evaluators:
        return [pa.array(np.zeros(n, np.int8))]
    return [ev(batch.columns, n) for ev in evaluators]


class Join(MultiInputOperator):
    kind = "join"
    STRUCTURE = frozenset({"_key_ev", "_residual"})

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        left_keys: tuple[BExpr, ...],
        right_keys: tuple[BExpr, ...],
        residual: BExpr | None,
        orderer: OrdererFactory | None = None,
        constraint: JoinConstraint | None = None,
        adherence: AdherenceFactory | None = None,
    ):
        super().__init__(name, inputs, output)
        self._key_ev = ([compile_expr(e) for e in left_keys], [compile_expr(e) for e in right_keys])
        # the residual's conjuncts are ordered like a selection's (engine/conjunction.py)
        self._residual = (
            Conjunction(residual, orderer, owner=name) if residual is not None else None
        )
        self._sides = (JoinSide(), JoinSide())
        self.nkeys = len(left_keys)
        # RIDS(k) on a many-one join: drops many-side rows that can never join (issue 26)
        self._reduction = (
            None
            if constraint is None or not self.nkeys
            else RidsReduction(constraint, adherence_for(constraint, adherence))
        )

    def describe(self) -> str:
        kind = f"hash join on {self.nkeys} key(s)" if self.nkeys else "nested-loop join"
        if self._reduction is not None:
            kind += f" using {self._reduction.describe()}"
        if self._residual is None:
            return kind
        order = self._residual.describe()
        return f"{kind} with residual" + (f" [{order}]" if order else "")

    @property
    def reduction(self) -> RidsReduction | None:
        """The constraint's state reduction, if the join has one: its k in use, rows dropped,
        results missed."""
        return self._reduction

    def filter_order(self) -> str:
        return "" if self._residual is None else self._residual.describe()

    def watches(self) -> list[Watch]:
        watch = None if self._residual is None else self._residual.watch
        return [] if watch is None else [watch]

    def constraint_status(self) -> ConstraintStatus | None:
        return None if self._reduction is None else self._reduction.status()

    def state_size(self) -> tuple[int, int]:
        left, right = self._sides
        extra = 0 if self._reduction is None else self._reduction.nbytes()
        return len(left) + len(right), left.nbytes() + right.nbytes() + extra

    def sides(self) -> tuple[int, int]:
        """Each input's current rows, counted by net weight: the sizes the selectivity of
        `key_matches` is relative to."""
        left, right = self._sides
        return left.net_rows(), right.net_rows()

    def key_matches(self) -> int:
        """Pairs of current rows, one from each side, whose keys are equal (each side's rows
        by net weight; a residual predicate is not applied): what the cost model's join
        selectivity is measured from. A pass over both synopses."""
        left, right = self._sides
        if not len(left) or not len(right):
            return 0
        if not self.nkeys:
            return math.prod(self.sides())
        counts = []
        for side in (left, right):
            _, keys, w = side.live_arrays()
            names = [f"k{i}" for i in range(len(keys))]
            t = pa.table({**dict(zip(names, keys)), "__w": w})
            counts.append(t.group_by(names, use_threads=False).aggregate([("__w", "sum")]))
        names = [f"k{i}" for i in range(self.nkeys)]
        both = counts[0].join(counts[1], keys=names, join_type="inner", use_threads=False,
                              right_suffix="_r")
        if both.num_rows == 0:
            return 0
        wl = both.column("__w_sum").to_numpy()
        wr = both.column("__w_sum_r").to_numpy()
        return int((wl * wr).sum())

    def _keys(self, port: int, batch: Batch) -> list[pa.Array]:
        return key_columns(self._key_ev[port], batch)

    # Deltas are joined in time slices of about this many elements: ΔL ⋈ ΔR holds every pair
    # of elements within a slice, including pairs that cancel (an element and its expiry), so it
    # grows with the square of the slice.
    SLICE_ROWS = 16_384
    # A slice of several instants whose ΔL ⋈ ΔR holds more than this many pairs per delta
    # element (and per MIN_CHECKED elements at least) is cut at its middle instant, again until
    # it holds fewer or one instant: short windows ([Now], small Ranges) otherwise pair each
    # element with the later elements of its key that its own expiry cancels (a [Now] join of
    # 400 instants of 5 rows a side made 3,192,005 elements from 7,990; cut, 82,445). The pairs
    # are the ones the step finds anyway, found before anything else is done.
    PAIRS_PER_ROW = 8
    MIN_CHECKED = 256

    def on_aligned(self, ready: list[Batch | None]) -> None:
        dl, dr = ready
        ticks = merge_ticks(*(b.ticks for b in ready if b is not None))
        dl, dr = _some(dl), _some(dr)
        n = (len(dl) if dl is not None else 0) + (len(dr) if dr is not None else 0)
        if n <= self.SLICE_ROWS or dl is None or dr is None:
            self._step(dl, dr, ticks)
            return
        # Cut both deltas at the same instants, so that every slice is complete in time.
        merged = np.sort(np.concatenate([dl.ts, dr.ts]), kind="stable")
        cuts = np.unique(merged[self.SLICE_ROWS - 1 :: self.SLICE_ROWS])
        for t in cuts.tolist():
            head, (dl, dr, ticks) = _cut(dl, dr, ticks, t)
            self._step(*head)
        self._step(dl, dr, ticks)

    def _step(self, dl: Batch | None, dr: Batch | None, ticks: np.ndarray) -> None:
        left, right = self._sides
        parts: list[Batch] = []
        lk = self._keys(0, dl) if dl is not None else None
        rk = self._keys(1, dr) if dr is not None else None
        pairs = None
        if dl is not None and dr is not None:
            pairs = match_keys(lk, rk)  # type: ignore[arg-type]
            if len(pairs[0]) > self.PAIRS_PER_ROW * max(len(dl) + len(dr), self.MIN_CHECKED):
                t = _middle_instant(dl, dr)
                if t is not None:  # several instants: each half alone, nothing changed yet
                    head, tail = _cut(dl, dr, ticks, t)
                    self._step(*head)
                    self._step(*tail)
                    return
        red = self._reduction
        tuples: list = [None, None]
        if red is not None:  # after any cut: each slice is admitted and settled once
            admitted = red.admit([dl, dr])
            if admitted[red.many] is not (dl, dr)[red.many]:  # dropped rows' retractions gone
                dl, dr = admitted
                lk = self._keys(0, dl) if dl is not None else None
                rk = self._keys(1, dr) if dr is not None else None
                pairs = match_keys(lk, rk) if dl is not None and dr is not None else None  # type: ignore[arg-type]
            tuples = [
                key_tuples(self._key_ev[p], b) if b is not None else None
                for p, b in enumerate((dl, dr))
            ]
            red.arrive([dl, dr], tuples)
        if dl is not None and len(right):  # ΔL ⋈ R0: look ΔL's keys up in R0
            i, j = right.lookup(lk)  # type: ignore[arg-type]
            if len(i):
                order = np.lexsort((j, i))
                i, j = i[order], j[order]
                rcols, rw = right.take(j)
                parts.append(_pairs(take_columns(dl.columns, i), rcols, dl.ts[i], dl.w[i] * rw))
        if dr is not None and len(left):  # L0 ⋈ ΔR: look ΔR's keys up in L0
            j, i = left.lookup(rk)  # type: ignore[arg-type]
            if len(i):
                order = np.lexsort((j, i))
                i, j = i[order], j[order]
                lcols, lw = left.take(i)
                parts.append(_pairs(lcols, take_columns(dr.columns, j), dr.ts[j], lw * dr.w[j]))
        if pairs is not None:
            i, j = pairs
            if len(i):
                ts = np.maximum(dl.ts[i], dr.ts[j])
                parts.append(
                    _pairs(take_columns(dl.columns, i), take_columns(dr.columns, j), ts, dl.w[i] * dr.w[j])
                )
        if dl is not None:
            left.add(list(dl.columns), lk, dl.w)  # type: ignore[arg-type]
        if dr is not None:
            right.add(list(dr.columns), rk, dr.w)  # type: ignore[arg-type]
        if red is not None:
            red.settle(self._sides, [dl, dr], tuples, [lk, rk])
        if not parts:
            self.emit(self.empty(ticks))
            return
        out = parts[0] if len(parts) == 1 else Batch.concat(parts)
        if self._residual is not None:
            out = self._residual.apply(out)
        if len(out) > 1 and not bool((out.ts[1:] >= out.ts[:-1]).all()):
            out = out.take(np.argsort(out.ts, kind="stable"))
        self.emit(out.with_ticks(ticks))


_Slice = tuple[Batch | None, Batch | None, np.ndarray]  # ΔL, ΔR (None: empty), ticks


def _cut(dl: Batch | None, dr: Batch | None, ticks: np.ndarray, t: int) -> tuple[_Slice, _Slice]:
    """Both deltas and the ticks cut after instant t: (up to t, the rest)."""
    k = int(np.searchsorted(ticks, t, side="right"))
    hl, tl = dl.split_at_time(t) if dl is not None else (None, None)
    hr, tr = dr.split_at_time(t) if dr is not None else (None, None)
    return (_some(hl), _some(hr), ticks[:k]), (_some(tl), _some(tr), ticks[k:])


def _some(b: Batch | None) -> Batch | None:
    """`b`, or None when it is empty."""
    return b if b is not None and len(b) else None


def _middle_instant(dl: Batch, dr: Batch) -> int | None:
    """The instant at which to cut two deltas into halves of about as many instants each (the
    head ends at it); None when they hold one instant."""
    first, last = min(dl.ts[0], dr.ts[0]), max(dl.ts[-1], dr.ts[-1])
    if first == last:
        return None
    instants = np.unique(np.concatenate([dl.ts, dr.ts]))
    return int(instants[(len(instants) - 1) // 2])


def take_columns(cols, idx: np.ndarray) -> list[pa.Array]:
    """The rows `idx` of each column."""
    pidx = pa.array(idx)
    return [pc.take(c, pidx) for c in cols]


def _pairs(lcols, rcols, ts: np.ndarray, w: np.ndarray) -> Batch:
    return Batch(tuple(lcols) + tuple(rcols), ts.astype(np.int64), w.astype(np.int64))
