"""Symmetric hash join of two relations on equi-keys, with a residual predicate.

Relations arrive as deltas. The join of two delta streams is bilinear: every pair of elements
(l, r) contributes weight w_l·w_r at instant max(τ_l, τ_r). So for the deltas ΔL, ΔR that arrive
up to a common heartbeat, with L0, R0 the multisets seen before them, the output is

    ΔL ⋈ R0 (at τ_l)  +  L0 ⋈ ΔR (at τ_r)  +  ΔL ⋈ ΔR (at max(τ_l, τ_r))

and then L0 += ΔL, R0 += ΔR. Each term is one vectorised hash join (Arrow's), so the work per
heartbeat is proportional to the deltas and the states, not to Python loops over elements.
Each side's synopsis is its current multiset (rows with net weights). NULL keys never match.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch, merge_ticks
from cq_service.engine.expressions import compile_expr, compile_predicate
from cq_service.engine.operators.base import MultiInputOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["Join", "key_tuples"]


def key_tuples(evaluators: list, batch: Batch) -> list[tuple | None]:
    """Each element's key as a tuple (None when any key part is NULL)."""
    n = len(batch)
    if not evaluators:
        return [()] * n
    parts = [ev(batch.columns, n).to_pylist() for ev in evaluators]
    return [None if None in k else k for k in zip(*parts)]


class _Side:
    """One input's current multiset: data columns, key columns, net weights."""

    def __init__(self) -> None:
        self.columns: list[pa.Array] | None = None
        self.keys: list[pa.Array] = []
        self.w = np.empty(0, np.int64)
        self._retractions = 0  # retracting rows appended since the last consolidation

    def __len__(self) -> int:
        return len(self.w)

    def nbytes(self) -> int:
        if self.columns is None:
            return 0
        return sum(c.nbytes for c in self.columns) + sum(k.nbytes for k in self.keys) + self.w.nbytes

    def add(self, cols: list[pa.Array], keys: list[pa.Array], w: np.ndarray) -> None:
        if self._expire_oldest(cols, keys, w):
            return
        if self.columns is None or len(self.w) == 0:
            self.columns, self.keys, self.w = list(cols), list(keys), w
        else:
            self.columns = [pa.concat_arrays([a, b]) for a, b in zip(self.columns, cols)]
            self.keys = [pa.concat_arrays([a, b]) for a, b in zip(self.keys, keys)]
            self.w = np.concatenate([self.w, w])
        self._retractions += int((w < 0).sum())
        # Consolidating costs a pass over the synopsis, so it waits until retractions are a good
        # part of it; until then they stay as rows of negative weight (joins stay exact).
        if self._retractions and self._retractions * 4 >= len(self.w):
            self._consolidate()
            self._retractions = 0

    def _expire_oldest(self, cols: list[pa.Array], keys: list[pa.Array], w: np.ndarray) -> bool:
        """The common case of a window's input: insertions, and retractions of the oldest rows
        in insertion order. Then the synopsis is a FIFO: drop the retracted rows from its
        front, no pass over it needed. Returns False (nothing done) in any other case."""
        if self.columns is None or self._retractions or not bool((np.abs(w) == 1).all()):
            return False
        minus = np.flatnonzero(w < 0)
        if len(minus) == 0 or not bool((self.w == 1).all()):
            return False
        plus = np.flatnonzero(w > 0)
        pi, mi = pa.array(plus), pa.array(minus)
        live = [pa.concat_arrays([a, b.take(pi)]) for a, b in zip(self.columns, cols)]
        k = len(minus)
        if not live or k > len(live[0]):
            return False
        for col, new in zip(live, cols):
            head, gone = col.slice(0, k), new.take(mi)
            same = pc.or_kleene(pc.equal(head, gone), pc.and_(head.is_null(), gone.is_null()))
            if not pc.all(same.fill_null(False)).as_py():
                return False
        self.columns = [c.slice(k) for c in live]
        self.keys = [pa.concat_arrays([a, b.take(pi)]).slice(k) for a, b in zip(self.keys, keys)]
        self.w = np.ones(len(self.columns[0]), np.int64)
        return True

    def _consolidate(self) -> None:
        """Net weight per distinct row; rows whose weight is zero leave the synopsis."""
        assert self.columns is not None
        names = [f"c{i}" for i in range(len(self.columns))]
        knames = [f"k{i}" for i in range(len(self.keys))]
        t = pa.table(
            {**dict(zip(names, self.columns)), **dict(zip(knames, self.keys)), "__w": self.w}
        )
        g = t.group_by(names + knames, use_threads=False).aggregate([("__w", "sum")])
        w = g.column("__w_sum").to_numpy()
        keep = w != 0
        idx = pa.array(np.flatnonzero(keep))
        self.columns = [g.column(n).take(idx).combine_chunks() for n in names]
        self.keys = [g.column(n).take(idx).combine_chunks() for n in knames]
        self.w = w[keep].astype(np.int64)


def _match(a_keys: list[pa.Array], b_keys: list[pa.Array]) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with a_keys[i] = b_keys[j] (NULLs never match)."""
    na, nb = len(a_keys[0]) if a_keys else 0, len(b_keys[0]) if b_keys else 0
    if na == 0 or nb == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    knames = [f"k{i}" for i in range(len(a_keys))]
    a = pa.table({**dict(zip(knames, a_keys)), "__i": pa.array(np.arange(na))})
    b = pa.table({**dict(zip(knames, b_keys)), "__j": pa.array(np.arange(nb))})
    j = a.join(b, keys=knames, join_type="inner", use_threads=False)
    i_idx = j.column("__i").to_numpy().astype(np.int64)
    j_idx = j.column("__j").to_numpy().astype(np.int64)
    order = np.argsort(i_idx * nb + j_idx)  # hash-join order is arbitrary; make it reproducible
    return i_idx[order], j_idx[order]


class Join(MultiInputOperator):
    kind = "join"

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        left_keys: tuple[BExpr, ...],
        right_keys: tuple[BExpr, ...],
        residual: BExpr | None,
    ):
        super().__init__(name, inputs, output)
        self._key_ev = ([compile_expr(e) for e in left_keys], [compile_expr(e) for e in right_keys])
        self._residual = compile_predicate(residual) if residual is not None else None
        self._sides = (_Side(), _Side())
        self.nkeys = len(left_keys)

    def describe(self) -> str:
        kind = f"hash join on {self.nkeys} key(s)" if self.nkeys else "nested-loop join"
        return kind + (" with residual" if self._residual else "")

    def state_size(self) -> tuple[int, int]:
        left, right = self._sides
        return len(left) + len(right), left.nbytes() + right.nbytes()

    def _keys(self, port: int, batch: Batch) -> list[pa.Array]:
        n = len(batch)
        if not self._key_ev[port]:
            return [pa.array(np.zeros(n, np.int8))]  # cross product: one shared key
        return [ev(batch.columns, n) for ev in self._key_ev[port]]

    # Deltas are joined in time slices of about this many elements: ΔL ⋈ ΔR holds every pair
    # of elements within a slice, including pairs that cancel (an element and its expiry), so it
    # grows with the square of the slice.
    SLICE_ROWS = 16_384

    def on_aligned(self, ready: list[Batch | None]) -> None:
        dl, dr = ready
        ticks = merge_ticks(*(b.ticks for b in ready if b is not None))
        dl = dl if dl is not None and len(dl) else None
        dr = dr if dr is not None and len(dr) else None
        n = (len(dl) if dl is not None else 0) + (len(dr) if dr is not None else 0)
        if n <= self.SLICE_ROWS or dl is None or dr is None:
            self._step(dl, dr, ticks)
            return
        # Cut both deltas at the same instants, so that every slice is complete in time.
        merged = np.sort(np.concatenate([dl.ts, dr.ts]), kind="stable")
        cuts = np.unique(merged[self.SLICE_ROWS - 1 :: self.SLICE_ROWS])
        for t in cuts.tolist():
            head_l, dl = dl.split_at_time(t)
            head_r, dr = dr.split_at_time(t)
            k = int(np.searchsorted(ticks, t, side="right"))
            head_ticks, ticks = ticks[:k], ticks[k:]
            self._step(head_l if len(head_l) else None, head_r if len(head_r) else None, head_ticks)
        self._step(dl if len(dl) else None, dr if len(dr) else None, ticks)

    def _step(self, dl: Batch | None, dr: Batch | None, ticks: np.ndarray) -> None:
        left, right = self._sides
        parts: list[Batch] = []
        lk = self._keys(0, dl) if dl is not None else None
        rk = self._keys(1, dr) if dr is not None else None
        if dl is not None and len(right):
            i, j = _match(lk, right.keys)  # type: ignore[arg-type]
            parts.append(self._pairs(dl.columns, right.columns, i, j, dl.ts[i], dl.w[i] * right.w[j]))
        if dr is not None and len(left):
            i, j = _match(left.keys, rk)  # type: ignore[arg-type]
            parts.append(self._pairs(left.columns, dr.columns, i, j, dr.ts[j], left.w[i] * dr.w[j]))
        if dl is not None and dr is not None:
            i, j = _match(lk, rk)  # type: ignore[arg-type]
            parts.append(
                self._pairs(dl.columns, dr.columns, i, j, np.maximum(dl.ts[i], dr.ts[j]), dl.w[i] * dr.w[j])
            )
        if dl is not None:
            left.add(list(dl.columns), lk, dl.w)  # type: ignore[arg-type]
        if dr is not None:
            right.add(list(dr.columns), rk, dr.w)  # type: ignore[arg-type]
        parts = [p for p in parts if len(p)]
        if not parts:
            self.emit(self.empty(ticks))
            return
        out = parts[0] if len(parts) == 1 else Batch.concat(parts)
        if self._residual is not None:
            out = out.filter(self._residual(out.columns, len(out)))
        if len(out) > 1 and not bool((out.ts[1:] >= out.ts[:-1]).all()):
            out = out.take(np.argsort(out.ts, kind="stable"))
        self.emit(out.with_ticks(ticks))

    @staticmethod
    def _pairs(lcols, rcols, i: np.ndarray, j: np.ndarray, ts: np.ndarray, w: np.ndarray) -> Batch:
        pi, pj = pa.array(i), pa.array(j)
        cols = tuple(pc.take(c, pi) for c in lcols) + tuple(pc.take(c, pj) for c in rcols)
        return Batch(cols, ts.astype(np.int64), w.astype(np.int64))
