"""Rstream: at every instant that matters, the whole relation.

Vectorised by lifetimes: every copy of a tuple is in the relation from its insertion to the
deletion that removes it (copies of equal tuples pair up first in, first out, which a bag cannot
tell apart). A completed stretch of instants I is then emitted at once: each copy alive at
instant t ∈ I is one element at t. Copies still alive stay in `_open` for the next stretch.
With a `[Now]` window below, every copy lives one instant, so Rstream costs what its input does.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cq_service.engine.batch import Batch
from cq_service.engine.consolidate import expand, row_codes
from cq_service.engine.instants import InstantBuffer, instants_of
from cq_service.engine.operators.base import UnaryOperator

__all__ = ["Rstream"]


class Rstream(UnaryOperator):
    kind = "rstream"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._buffer = InstantBuffer()
        self._open: Batch | None = None  # live copies (weight 1), `ts` their insertion time

    def state_size(self) -> tuple[int, int]:
        n = (len(self._open) if self._open is not None else 0) + self._buffer.rows
        return n, n * 8 * (len(self.out_types) + 2)

    def on_batch(self, batch: Batch) -> None:
        self._out(self._buffer.add(batch))

    def on_heartbeat(self, ts: int) -> None:
        self._out(self._buffer.complete(ts))

    def _out(self, done: Batch | None) -> None:
        if done is None:
            return
        instants = instants_of(done)
        if len(instants) == 0:
            self.emit(self.empty(done.ticks))
            return
        inserts = expand(done.filter(done.w > 0))
        deletes = expand(done.filter(done.w < 0))
        parts = [b for b in (self._open, inserts) if b is not None and len(b)]
        live = Batch.concat(parts) if parts else inserts
        n = len(live)
        born = live.ts
        died = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        if len(deletes) and n:
            codes = row_codes(Batch.concat([live, deletes]))
            live_codes, del_codes = codes[:n], codes[n:]
            # FIFO pairing per tuple: the k-th deletion of a tuple ends its k-th live copy.
            lo = np.lexsort((born, live_codes))
            do = np.lexsort((deletes.ts, del_codes))
            lrank = _rank_within(live_codes[lo])
            drank = _rank_within(del_codes[do])
            lkey = live_codes[lo].astype(np.int64) * (n + len(deletes) + 1) + lrank
            dkey = del_codes[do].astype(np.int64) * (n + len(deletes) + 1) + drank
            pos = np.searchsorted(lkey, dkey)
            # (A deletion without a live copy cannot come from a relation; it is ignored.)
            ok = (pos < n) & (lkey[np.minimum(pos, n - 1)] == dkey)
            died[lo[pos[ok]]] = deletes.ts[do][ok]
        # Each copy is emitted at the instants of this stretch in [born, died).
        first = np.searchsorted(instants, born, side="left")
        last = np.searchsorted(instants, died, side="left")
        counts = np.maximum(last - first, 0)
        total = int(counts.sum())
        if total:
            which = np.repeat(np.arange(n), counts)
            offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
            out_ts = instants[np.repeat(first, counts) + offsets]
            order = np.argsort(out_ts, kind="stable")
            idx = pa.array(which[order])
            out = Batch(
                tuple(c.take(idx) for c in live.columns),
                out_ts[order],
                np.ones(total, dtype=np.int64),
                done.ticks,
            )
        else:
            out = self.empty(done.ticks)
        still = died == np.iinfo(np.int64).max
        self._open = live.filter(still) if n else None
        self.emit(out)


def _rank_within(sorted_codes: np.ndarray) -> np.ndarray:
    """0, 1, 2, … within each run of equal codes of a sorted array."""
    n = len(sorted_codes)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.r_[True, sorted_codes[1:] != sorted_codes[:-1]]
    start_pos = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    return np.arange(n) - start_pos
