"""Projection: compute the output columns of each element."""

from __future__ import annotations

from cq_service.cql.logical import BExpr, ColRef
from cq_service.engine.batch import Batch
from cq_service.engine.expressions import compile_expr
from cq_service.engine.operators.base import UnaryOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["Project"]


class Project(UnaryOperator):
    kind = "project"
    STRUCTURE = frozenset({"_plan"})

    def __init__(self, name: str, inputs: list[QueueReader], output: Queue, exprs: tuple[BExpr, ...]):
        super().__init__(name, inputs, output)
        # Plain column references are taken as they are (zero copy).
        self._plan = [
            (e.index, None) if isinstance(e, ColRef) else (None, compile_expr(e)) for e in exprs
        ]

    def on_batch(self, batch: Batch) -> None:
        n = len(batch)
        cols = batch.columns
        out = tuple(cols[i] if i is not None else ev(cols, n) for i, ev in self._plan)
        self.emit(batch.with_columns(out))
