"""Istream: at each instant, the tuples the relation gained (R(τ) − R(τ−1), as a bag)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cq_service.engine.batch import Batch
from cq_service.engine.consolidate import consolidate, expand
from cq_service.engine.instants import InstantBuffer
from cq_service.engine.operators.base import UnaryOperator

__all__ = ["Istream", "RelationToStream"]

_FIB = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio: multiplicative hashing


class RelationToStream(UnaryOperator):
    """Base of Istream and Dstream: consolidate each complete instant, keep one sign.

    `input_distinct`: the input never holds one row twice at an instant (an aggregate's
    changes: per group and instant at most one − old and one + new row, and only when they
    differ; engine/build.py says when). Nothing can cancel then, so each batch's elements of the
    kept sign pass at once, with no instant to wait for."""

    kind = "istream"
    sign = 1
    STRUCTURE = frozenset({"input_distinct"})

    def __init__(self, *args, input_distinct: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_distinct = input_distinct
        self._buffer = InstantBuffer()

    def state_size(self) -> tuple[int, int]:
        return self._buffer.rows, self._buffer.nbytes

    def on_batch(self, batch: Batch) -> None:
        if self.input_distinct and not self._buffer.rows:  # (a restored buffer drains first)
            kept = batch.filter(batch.w * self.sign > 0)
            self.emit(Batch(kept.columns, kept.ts, np.abs(kept.w), batch.ticks))
            return
        self._out(self._buffer.add(batch))

    def on_heartbeat(self, ts: int) -> None:
        self._out(self._buffer.complete(ts))

    def _out(self, done: Batch | None) -> None:
        if done is None:
            return
        if self.sign > 0 and bool((done.w > 0).all()):
            self.emit(expand(done))  # nothing to cancel
            return
        # Only elements that may cancel need consolidating: those whose (instant, int columns)
        # also occurs with the other sign. The rest pass as they are.
        wanted = done.w * self.sign > 0
        maybe = _may_cancel(done)
        sure = done.filter(wanted & ~maybe)
        sure = Batch(sure.columns, sure.ts, np.abs(sure.w), sure.ticks)
        net = consolidate(done.filter(maybe))
        keep = net.w * self.sign > 0
        net = net.filter(keep) if not keep.all() else net
        net = Batch(net.columns, net.ts, np.abs(net.w), net.ticks)
        out = Batch.concat([sure, net]).with_ticks(done.ticks) if len(net) else sure
        if len(out) > 1 and not bool((out.ts[1:] >= out.ts[:-1]).all()):
            out = out.take(np.argsort(out.ts, kind="stable"))
        self.emit(expand(out))


def _may_cancel(batch: Batch) -> np.ndarray:
    """True for elements that might cancel with an element of the other sign at the same
    instant: a superset, by a hash of the instant and every int column (NULL hashed as 0;
    everything at the instant when no int column can narrow it down) into a bitmap per sign of
    at least 8 buckets per element (so about one element in 16 is marked without cause)."""
    pos = batch.w > 0
    if pos.all() or not pos.any():
        return np.zeros(len(batch), dtype=bool)
    key = batch.ts.copy()
    for col in batch.columns:
        if pa.types.is_integer(col.type):
            vals = col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            with np.errstate(over="ignore"):
                key = key * np.int64(1_000_003) + vals
    bits = max(10, (8 * len(key) - 1).bit_length())
    h = ((key.view(np.uint64) * _FIB) >> np.uint64(64 - bits)).astype(np.intp)
    plus = np.zeros(1 << bits, dtype=bool)
    minus = np.zeros(1 << bits, dtype=bool)
    plus[h[pos]] = True
    minus[h[~pos]] = True
    return plus[h] & minus[h]


class Istream(RelationToStream):
    kind = "istream"
    sign = 1
