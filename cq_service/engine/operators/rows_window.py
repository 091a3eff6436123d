"""`[Rows N]` and `[Partition By a, … Rows N]`: the last N tuples (per partition).

A tuple leaves when the N-th tuple after it (in its partition) arrives, at that tuple's
timestamp. Ties keep arrival order.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch
from cq_service.engine.operators.window_base import WindowOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["PartitionRowsWindow", "RowsWindow"]


class RowsWindow(WindowOperator):
    kind = "rows window"

    def __init__(self, name: str, inputs: list[QueueReader], output: Queue, n: int, where: BExpr | None):
        super().__init__(name, inputs, output, where)
        self.n = n
        self._window: Batch | None = None

    def describe(self) -> str:
        return f"rows window [Rows {self.n}]"

    def state_size(self) -> tuple[int, int]:
        w = self._window
        return (0, 0) if w is None else (len(w), w.nbytes())

    def on_batch(self, batch: Batch) -> None:
        adm = self.admit(batch)
        if len(adm) == 0:
            if len(batch.ticks):
                self.emit(self.empty(batch.ticks))
            return
        plus = Batch(adm.columns, adm.ts, np.ones(len(adm), np.int64))
        comb = plus if self._window is None else Batch.concat([self._window, plus])
        m, n = len(comb), self.n
        if m <= n:
            self._window = comb
            self.emit(plus.with_ticks(batch.ticks))
            return
        d = m - n
        gone = comb.slice(0, d)
        minus = Batch(gone.columns, comb.ts[n : n + d], -np.ones(d, np.int64))
        self._window = comb.slice(d, m)
        out = Batch.concat([minus, plus])
        out = out.take(np.argsort(out.ts, kind="stable"))
        self.emit(out.with_ticks(batch.ticks))


class PartitionRowsWindow(WindowOperator):
    kind = "partitioned rows window"

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        n: int,
        keys: tuple[int, ...],
        where: BExpr | None,
    ):
        super().__init__(name, inputs, output, where)
        self.n = n
        self.keys = keys
        self._parts: dict[tuple, deque[tuple]] = {}
        self._rows = 0

    def describe(self) -> str:
        return f"partitioned rows window [Partition By {list(self.keys)} Rows {self.n}]"

    def state_size(self) -> tuple[int, int]:
        return self._rows, self._rows * 8 * (len(self.out_types) + 2)

    def on_batch(self, batch: Batch) -> None:
        adm = self.admit(batch)
        if len(adm) == 0:
            if len(batch.ticks):
                self.emit(self.empty(batch.ticks))
            return
        rows = adm.rows()
        out_rows: list[tuple] = []
        out_ts: list[int] = []
        out_w: list[int] = []
        for row, t in zip(rows, adm.ts.tolist()):
            key = tuple(row[k] for k in self.keys)
            part = self._parts.get(key)
            if part is None:
                part = self._parts[key] = deque()
            part.append(row)
            out_rows.append(row)
            out_ts.append(t)
            out_w.append(1)
            if len(part) > self.n:
                out_rows.append(part.popleft())
                out_ts.append(t)
                out_w.append(-1)
            else:
                self._rows += 1
        self.emit(Batch.from_rows(out_rows, out_ts, out_w, self.out_types, batch.ticks))
