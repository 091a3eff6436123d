"""Rstream: at every instant that matters, the whole relation."""

from __future__ import annotations

from collections import Counter

from cq_service.engine.batch import Batch
from cq_service.engine.instants import InstantBuffer, instants_of
from cq_service.engine.operators.base import UnaryOperator

__all__ = ["Rstream"]


class Rstream(UnaryOperator):
    kind = "rstream"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._buffer = InstantBuffer()
        self._relation: Counter[tuple] = Counter()

    def state_size(self) -> tuple[int, int]:
        n = len(self._relation) + self._buffer.rows
        return n, n * 8 * (len(self.out_types) + 2)

    def on_batch(self, batch: Batch) -> None:
        self._out(self._buffer.add(batch))

    def on_heartbeat(self, ts: int) -> None:
        self._out(self._buffer.complete(ts))

    def _out(self, done: Batch | None) -> None:
        if done is None:
            return
        rows = done.rows()
        ts = done.ts.tolist()
        ws = done.w.tolist()
        rel = self._relation
        out_rows: list[tuple] = []
        out_ts: list[int] = []
        i, n = 0, len(rows)
        for t in instants_of(done).tolist():
            while i < n and ts[i] == t:
                c = rel[rows[i]] + ws[i]
                if c:
                    rel[rows[i]] = c
                else:
                    del rel[rows[i]]
                i += 1
            for row, cnt in rel.items():
                out_rows.extend([row] * cnt)
                out_ts.extend([t] * cnt)
        self.emit(Batch.from_rows(out_rows, out_ts, [1] * len(out_rows), self.out_types, done.ticks))
