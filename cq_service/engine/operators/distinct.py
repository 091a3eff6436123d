"""Duplicate elimination: each distinct row once while its multiplicity is positive."""

from __future__ import annotations

from collections import Counter

from cq_service.engine.batch import Batch
from cq_service.engine.operators.base import UnaryOperator

__all__ = ["Distinct"]


class Distinct(UnaryOperator):
    kind = "distinct"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._counts: Counter[tuple] = Counter()

    def state_size(self) -> tuple[int, int]:
        n = len(self._counts)
        return n, n * 8 * (len(self.out_types) + 2)

    def on_batch(self, batch: Batch) -> None:
        out_rows, out_ts, out_w = [], [], []
        counts = self._counts
        for row, t, w in zip(batch.rows(), batch.ts.tolist(), batch.w.tolist()):
            before = counts[row]
            after = before + w
            if after:
                counts[row] = after
            else:
                del counts[row]
            if before <= 0 < after:
                out_rows.append(row)
                out_ts.append(t)
                out_w.append(1)
            elif after <= 0 < before:
                out_rows.append(row)
                out_ts.append(t)
                out_w.append(-1)
        self.emit(Batch.from_rows(out_rows, out_ts, out_w, self.out_types, batch.ticks))
