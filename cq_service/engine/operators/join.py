"""Symmetric hash join of two relations on equi-keys, with a residual predicate.

Each side's synopsis maps a key to the multiset of that side's rows. A delta on one side joins
the other side's current multiset, and the output weight is the product of the weights — the
join of deltas, so deletions retract exactly what insertions produced. NULL keys never match.
"""

from __future__ import annotations

from collections import Counter

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch
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
        self._keys = ([compile_expr(e) for e in left_keys], [compile_expr(e) for e in right_keys])
        self._residual = compile_predicate(residual) if residual is not None else None
        self._state: tuple[dict, dict] = ({}, {})
        self._rows = [0, 0]
        self.nkeys = len(left_keys)

    def describe(self) -> str:
        kind = "hash join" if self.nkeys else "nested-loop join"
        return kind + (" with residual" if self._residual else "")

    def state_size(self) -> tuple[int, int]:
        rows = self._rows[0] + self._rows[1]
        return rows, rows * 8 * (len(self.out_types) + 2)

    def on_run(self, port: int, batch: Batch) -> None:
        if len(batch) == 0:
            self.emit(self.empty(batch.ticks))
            return
        keys = key_tuples(self._keys[port], batch)
        rows = batch.rows()
        mine, other = self._state[port], self._state[1 - port]
        out_rows: list[tuple] = []
        out_ts: list[int] = []
        out_w: list[int] = []
        for row, key, t, w in zip(rows, keys, batch.ts.tolist(), batch.w.tolist()):
            if key is None:
                continue
            group = other.get(key)
            if group:
                for orow, cnt in group.items():
                    out_rows.append(row + orow if port == 0 else orow + row)
                    out_ts.append(t)
                    out_w.append(w * cnt)
            mg = mine.get(key)
            if mg is None:
                mg = mine[key] = Counter()
            c = mg[row] + w
            self._rows[port] += w
            if c:
                mg[row] = c
            else:
                del mg[row]
                if not mg:
                    del mine[key]
        out = Batch.from_rows(out_rows, out_ts, out_w, self.out_types, batch.ticks)
        if self._residual is not None and len(out):
            out = out.filter(self._residual(out.columns, len(out)))
        self.emit(out)
