"""Pipelined filters as the thesis' examples build them: filter F_i keeps a value when it is in
table T_i (one hash probe), run through the engine's real `Select` over one int column."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from cq_service.cql.logical import Call, ColRef, Const
from cq_service.engine.batch import Batch
from cq_service.engine.filter_order import ConjunctOrderer
from cq_service.engine.operators.select import Select
from cq_service.engine.queues import Queue
from cq_service.types import DataType

INT = DataType.INT
BOOL = DataType.BOOL

# Example 4.2.1 (Figure 4.2 was lost in extraction): tables rebuilt from the profile window of
# Figure 4.3 (which values each filter drops) and Example 4.3.3 (3 and 6 dropped by F4 only).
TABLES_4_2_1 = (
    {1, 2, 3, 4, 6},  # F1 drops 5, 7
    {1, 2, 3, 6, 7},  # F2 drops 4, 5
    {1, 3, 5, 6, 7},  # F3 drops 2, 4
    {1, 2, 7},  # F4 drops 3, 4, 5, 6
)
INPUT_4_2_1 = (1, 2, 1, 4, 7, 2, 5, 4)


class FixedOrder:
    """An orderer that never changes its given order (and never profiles)."""

    name = "fixed"

    def __init__(self, order: Sequence[int]):
        self._order = list(order)

    def order(self) -> Sequence[int]:
        return self._order

    def sample(self, position: int, dropped: int) -> np.ndarray:
        return np.empty(0, np.int64)

    def profile_positions(self, position: int) -> Sequence[int]:
        return ()

    def observe(self, rows, seconds, known, drops) -> None:
        pass


def membership(tables: Sequence[set[int]]) -> Call:
    """F_1 AND … AND F_n, F_i = `x IN T_i`."""
    x = ColRef(0, INT, "x")
    filters = [Call("in_list", (x, *(Const(v, INT) for v in sorted(t))), BOOL) for t in tables]
    pred = filters[0]
    for f in filters[1:]:
        pred = Call("and", (pred, f), BOOL)
    return pred


def select(tables: Sequence[set[int]], orderer: Callable[[int], ConjunctOrderer]) -> Select:
    op = Select("#sel", [], Queue("q"), membership(tables), orderer)
    op.out_types = [INT]
    return op


def feed(op: Select, values: Sequence[int]) -> list[int]:
    """Run one batch of `values` through `op` as one executor step (its re-optimizers
    polled after it, engine/streamon.py); the values it keeps."""
    n = len(values)
    batch = Batch.from_rows(
        [(v,) for v in values], np.zeros(n, np.int64), np.ones(n, np.int64), [INT]
    )
    out: list[Batch] = []
    op.emit = out.append  # type: ignore[method-assign]
    op.on_batch(batch)
    for watch in op.watches():
        watch.poll()
    return [r[0] for b in out for r in b.rows()]
