"""UNION, EXCEPT and INTERSECT of two relations, with bag (ALL) or set semantics.

The operator keeps each row's multiplicity on both sides; after a delta the output multiplicity
f(a, b) is recomputed and the difference emitted. UNION ALL needs no state: it is a merge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from cq_service.engine.batch import Batch
from cq_service.engine.operators.base import MultiInputOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["SetOperation"]

_RULES: dict[tuple[str, bool], Callable[[int, int], int]] = {
    ("union", True): lambda a, b: a + b,
    ("union", False): lambda a, b: 1 if a + b > 0 else 0,
    ("except", True): lambda a, b: max(a - b, 0),
    ("except", False): lambda a, b: 1 if a > 0 and b == 0 else 0,
    ("intersect", True): lambda a, b: min(a, b),
    ("intersect", False): lambda a, b: 1 if a > 0 and b > 0 else 0,
}


class SetOperation(MultiInputOperator):
    kind = "set operation"
    STRUCTURE = frozenset({"_f"})

    def __init__(self, name: str, inputs: list[QueueReader], output: Queue, op: str, all_: bool):
        super().__init__(name, inputs, output)
        self.op = op
        self.all = all_
        self._f = _RULES[(op, all_)]
        self._counts: tuple[Counter, Counter] = (Counter(), Counter())

    def describe(self) -> str:
        return f"{self.op}{' all' if self.all else ''}"

    def state_size(self) -> tuple[int, int]:
        n = len(self._counts[0]) + len(self._counts[1])
        return n, n * 8 * (len(self.out_types) + 2)

    def on_run(self, port: int, batch: Batch) -> None:
        if self.op == "union" and self.all:
            self.emit(batch)
            return
        mine, other = self._counts[port], self._counts[1 - port]
        f = self._f
        out_rows, out_ts, out_w = [], [], []
        for row, t, w in zip(batch.rows(), batch.ts.tolist(), batch.w.tolist()):
            a0 = mine[row]
            b = other[row]
            before = f(a0, b) if port == 0 else f(b, a0)
            a1 = a0 + w
            if a1:
                mine[row] = a1
            else:
                del mine[row]
            after = f(a1, b) if port == 0 else f(b, a1)
            if after != before:
                out_rows.append(row)
                out_ts.append(t)
                out_w.append(after - before)
        self.emit(Batch.from_rows(out_rows, out_ts, out_w, self.out_types, batch.ticks))
